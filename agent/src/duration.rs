//! Durations as people type them: a bare number is seconds, as for `timeout 5`,
//! `sleep 5`, `iperf3 -t 5` and `ping -w 5`; humantime's forms (`500ms`, `1m30s`, `7d`)
//! work too. One parser for every flag, environment variable, configuration key and API
//! parameter that takes a duration, each with the longest value that makes sense there.

use std::time::Duration;

/// One minute, hour and day, for limits.
pub const MINUTE: Duration = Duration::from_secs(60);
/// One hour.
pub const HOUR: Duration = Duration::from_secs(3600);
/// One day.
pub const DAY: Duration = Duration::from_secs(86_400);

/// What is wrong with a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing was given.
    #[error("a duration is needed, e.g. 5 (seconds), 500ms or 1m30s")]
    Empty,
    /// A minus sign.
    #[error("{0:?} is negative; give a duration such as 5 (seconds), 500ms or 1m30s")]
    Negative(String),
    /// Zero.
    #[error("{0:?} is zero; give a duration longer than zero")]
    Zero(String),
    /// Longer than this use allows.
    #[error("{given:?} is too long: at most {max}")]
    TooLong {
        /// What was given.
        given: String,
        /// The limit, as humantime prints it.
        max: String,
    },
    /// Not a duration at all.
    #[error("{given:?} is not a duration: {why} (examples: 5, 2.5, 500ms, 1m30s)")]
    Invalid {
        /// What was given.
        given: String,
        /// What humantime said.
        why: String,
    },
}

/// Parses `text`: a bare number of seconds (`5`, `2.5`) or a humantime duration, longer
/// than zero and at most `max`.
pub fn parse(text: &str, max: Duration) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative(s.to_owned()));
    }
    let too_long = || DurationError::TooLong {
        given: s.to_owned(),
        max: humantime::format_duration(max).to_string(),
    };
    let d = if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = s.parse().map_err(|_| DurationError::Invalid {
            given: s.to_owned(),
            why: "not a number".into(),
        })?;
        if secs > max.as_secs_f64() {
            return Err(too_long());
        }
        Duration::from_secs_f64(secs)
    } else {
        humantime::parse_duration(s).map_err(|e| match e {
            humantime::DurationError::NumberOverflow => too_long(),
            other => DurationError::Invalid {
                given: s.to_owned(),
                why: other.to_string(),
            },
        })?
    };
    if d.is_zero() {
        return Err(DurationError::Zero(s.to_owned()));
    }
    if d > max {
        return Err(too_long());
    }
    Ok(d)
}

/// A clap value parser for durations of at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct AtMost(pub Duration);

impl clap::builder::TypedValueParser for AtMost {
    type Value = Duration;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Duration, clap::Error> {
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(clap::error::ErrorKind::InvalidUtf8, "not UTF-8\n").with_cmd(cmd)
        })?;
        parse(text, self.0).map_err(|e| {
            let name = arg.map_or_else(|| "value".to_owned(), ToString::to_string);
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for {name}: {e}\n"),
            )
            .with_cmd(cmd)
        })
    }
}

/// A duration as a configuration file gives it: a string (`"10s"`, `"10"`) or a number
/// (`10`, `2.5`), bare numbers meaning seconds. Parsed with [`parse`] once the key's limit
/// is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Written(pub String);

impl<'de> serde::Deserialize<'de> for Written {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
            Float(f64),
        }
        Ok(Written(match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Int(n) => n.to_string(),
            Raw::Float(f) => f.to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse("5", DAY), Ok(Duration::from_secs(5)));
        assert_eq!(parse(" 30 ", DAY), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2.5", DAY), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("0.5", DAY), Ok(Duration::from_millis(500)));
    }

    #[test]
    fn humantime_forms_still_work() {
        assert_eq!(parse("500ms", DAY), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1m30s", DAY), Ok(Duration::from_secs(90)));
        assert_eq!(parse("7d", 10 * 365 * DAY), Ok(7 * DAY));
    }

    #[test]
    fn nonsense_is_refused_clearly() {
        assert_eq!(parse("", DAY), Err(DurationError::Empty));
        assert!(matches!(parse("-5", DAY), Err(DurationError::Negative(_))));
        assert!(matches!(parse("-5s", DAY), Err(DurationError::Negative(_))));
        assert!(matches!(parse("0", DAY), Err(DurationError::Zero(_))));
        assert!(matches!(parse("0s", DAY), Err(DurationError::Zero(_))));
        assert!(matches!(parse("0.0", DAY), Err(DurationError::Zero(_))));
        assert!(matches!(
            parse("1.2.3", DAY),
            Err(DurationError::Invalid { .. })
        ));
        assert!(matches!(
            parse("5 parsecs", DAY),
            Err(DurationError::Invalid { .. })
        ));
        let e = parse("2d", DAY).expect_err("too long");
        assert_eq!(e.to_string(), "\"2d\" is too long: at most 1day");
        assert!(matches!(
            parse("86401", DAY),
            Err(DurationError::TooLong { .. })
        ));
        // Far beyond what a Duration holds: refused, not a panic or an overflow.
        assert!(matches!(
            parse("99999999999999999999999", DAY),
            Err(DurationError::TooLong { .. })
        ));
        assert!(matches!(
            parse("99999999999999999999999y", DAY),
            Err(DurationError::TooLong { .. })
        ));
        assert_eq!(parse("86400", DAY), Ok(DAY));
    }

    #[test]
    fn configuration_values_may_be_numbers() {
        #[derive(serde::Deserialize)]
        struct C {
            a: Written,
            b: Written,
            c: Written,
        }
        let c: C = toml::from_str("a = 10\nb = 2.5\nc = \"1m\"\n").expect("toml");
        assert_eq!(parse(&c.a.0, DAY), Ok(Duration::from_secs(10)));
        assert_eq!(parse(&c.b.0, DAY), Ok(Duration::from_millis(2500)));
        assert_eq!(parse(&c.c.0, DAY), Ok(MINUTE));
        let c: Result<C, _> = toml::from_str("a = -1\nb = 1\nc = 1\n");
        assert!(parse(&c.expect("toml").a.0, DAY).is_err());
    }
}
