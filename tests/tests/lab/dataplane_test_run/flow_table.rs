//! The flow table's size (`Options::max_flows`, set before load) and its eviction count:
//! more distinct flows than the table holds are counted as evictions, fewer are not.

use std::mem::MaybeUninit;

use anyhow::{ensure, Context, Result};
use netdoctor::kernel::packet::{Dataplane, LinkType, Options, ProgramKind};
use netdoctor_lab::lab_guard;
use netdoctor_lab::packet::builder as pkt;

use crate::dataplane_test_run::harness::{run, LO};

const TABLE: u32 = 1024;

/// Loads a data plane with a `TABLE`-flow table, sends `flows` one-packet UDP flows
/// through tc ingress and returns (flows read, table entries, evictions, capacity).
fn distinct_flows(flows: u32) -> Result<(usize, u64, u64, u64)> {
    let mut storage = MaybeUninit::uninit();
    let options = Options {
        max_flows: TABLE,
        ..Options::default()
    };
    let dp = Dataplane::load(&mut storage, options).context("load data plane")?;
    dp.watch(LO, 1500, LinkType::Ether)?;
    for i in 0..flows {
        // Distinct (source port, destination port) pairs: one flow each.
        let sport = 1024 + (i % 60_000) as u16;
        let dport = 1 + (i / 60_000) as u16;
        run(
            &dp,
            ProgramKind::TcIngress,
            &pkt::v4(pkt::UDP, &pkt::udp(sport, dport, &pkt::data(20))),
        )?;
    }
    let (read, table) = dp.flows_and_table()?;
    Ok((read.len(), table.entries, table.evictions, table.capacity))
}

#[test]
fn flow_table_size_and_evictions() -> Result<()> {
    lab_guard!();
    // Healthy twin: fewer flows than any CPU's share of the table (the LRU's lists are per
    // CPU, each with an equal share of the entries): nothing evicted, every flow there.
    let few = 300;
    let (read, entries, evictions, capacity) = distinct_flows(few)?;
    ensure!(
        capacity == u64::from(TABLE),
        "capacity {capacity}, want {TABLE}"
    );
    ensure!(
        evictions == 0,
        "{evictions} evictions with {few} flows in a {TABLE}-flow table"
    );
    ensure!(
        entries == u64::from(few) && read == few as usize,
        "{few} flows: {entries} table entries, {read} flows read"
    );

    // Three times more flows than the table holds: the table stays within its size and
    // every flow missing from it was evicted (a flow whose cache slot was retired after its
    // entry was evicted comes back and may be evicted again, so at least that many).
    let many = 3 * TABLE;
    let (_, entries, evictions, _) = distinct_flows(many)?;
    ensure!(
        entries <= u64::from(TABLE),
        "{entries} entries in a {TABLE}-flow table"
    );
    ensure!(
        evictions >= u64::from(many) - entries,
        "{evictions} evictions counted, but {} of {many} flows are missing from the table",
        u64::from(many) - entries
    );
    println!("{many} flows in a {TABLE}-flow table: {entries} entries, {evictions} evictions");
    Ok(())
}
