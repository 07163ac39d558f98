//! One scrape's families under construction: samples are put by family name, their labels
//! named by the family's declaration in [`FAMILIES`]; families left empty are not exposed.

use std::collections::BTreeMap;

use prometheus::proto::{self, LabelPair, Metric, MetricFamily};

use super::MetricType::COUNTER;
use super::FAMILIES;

/// Builds the families of one scrape.
pub(super) struct Out {
    families: BTreeMap<&'static str, MetricFamily>,
}

impl Out {
    pub(super) fn new() -> Self {
        let mut families = BTreeMap::new();
        for (name, help, kind, _) in FAMILIES {
            let mut f = MetricFamily::default();
            f.set_name((*name).to_owned());
            f.set_help((*help).to_owned());
            f.set_field_type(*kind);
            families.insert(*name, f);
        }
        Out { families }
    }

    fn labels(name: &str, values: &[&str]) -> Vec<LabelPair> {
        let names = FAMILIES
            .iter()
            .find(|f| f.0 == name)
            .map_or(&[][..], |f| f.3);
        names
            .iter()
            .zip(values)
            .map(|(n, v)| {
                let mut l = LabelPair::default();
                l.set_name((*n).to_owned());
                l.set_value((*v).to_owned());
                l
            })
            .collect()
    }

    /// Adds a gauge or counter sample (by the family's declared type).
    pub(super) fn put(&mut self, name: &'static str, values: &[&str], v: f64) {
        let Some(f) = self.families.get_mut(name) else {
            return;
        };
        let mut m = Metric::default();
        m.set_label(Self::labels(name, values));
        if f.get_field_type() == COUNTER {
            let mut c = proto::Counter::default();
            c.set_value(v);
            m.set_counter(c);
        } else {
            let mut g = proto::Gauge::default();
            g.set_value(v);
            m.set_gauge(g);
        }
        f.mut_metric().push(m);
    }

    pub(super) fn histogram(
        &mut self,
        name: &'static str,
        values: &[&str],
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) {
        let Some(f) = self.families.get_mut(name) else {
            return;
        };
        let mut h = proto::Histogram::default();
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(bounds.len());
        for (bound, n) in bounds.iter().zip(counts) {
            cumulative += n;
            let mut b = proto::Bucket::default();
            b.set_upper_bound(*bound);
            b.set_cumulative_count(cumulative);
            buckets.push(b);
        }
        h.set_bucket(buckets);
        h.set_sample_count(counts.iter().sum());
        h.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_label(Self::labels(name, values));
        m.set_histogram(h);
        f.mut_metric().push(m);
    }

    pub(super) fn finish(self) -> Vec<MetricFamily> {
        self.families
            .into_values()
            .filter(|f| !f.get_metric().is_empty())
            .collect()
    }
}
