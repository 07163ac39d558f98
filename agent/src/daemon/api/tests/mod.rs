//! The whole router in process, as the server runs it, through
//! `tower::ServiceExt::oneshot`: no socket, no root (except where a test runs a real
//! diagnosis). [`fixture`] builds the application on an in-memory store once per test.

// Helpers for every API test, present and future: not each test uses each of them.
#[allow(dead_code)]
mod fixture;

mod auth;
mod bad_parameters;
mod diagnose;
mod events;
mod health;
mod live;
mod origin;
mod params;
