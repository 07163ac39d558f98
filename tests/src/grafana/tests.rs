//! Reading the Grafana dashboard: variables replaced, targets found, on sample documents.

use super::*;

#[test]
fn substitutes_every_form() -> Result<()> {
    let s = Substitutions {
        instance: "10.0.0.7:9477".to_owned(),
        interface: "wg0|eth0".to_owned(),
        rate_interval: Duration::from_secs(60),
        interval: Duration::from_millis(15_500),
        range: Duration::from_secs(3600),
    };
    let got = substitute(
        r#"rate(x{instance=~"$instance", interface=~"$interface", a=~"${interface}", b=~"${interface:regex}", c=~"[[interface]]"}[$__rate_interval]) / $__interval_ms + increase(y[${__range}]) + $__range_s"#,
        &s,
    )?;
    assert_eq!(
        got,
        r#"rate(x{instance=~"10.0.0.7:9477", interface=~"wg0|eth0", a=~"wg0|eth0", b=~"wg0|eth0", c=~"wg0|eth0"}[60s]) / 15500 + increase(y[3600s]) + 3600"#
    );
    assert_eq!(substitute("z[$__interval]", &s)?, "z[15500ms]");
    Ok(())
}

#[test]
fn leaves_regex_anchors_and_range_selectors_alone() -> Result<()> {
    let s = Substitutions::default();
    assert_eq!(
        substitute(r#"up{job=~"^netdoctor$"}[5m]"#, &s)?,
        r#"up{job=~"^netdoctor$"}[5m]"#
    );
    Ok(())
}

#[test]
fn unknown_variables_are_errors() {
    let s = Substitutions::default();
    assert!(substitute("up{job=~\"$job\"}", &s).is_err());
    assert!(substitute("up{instance=~\"${host:pipe}\"}", &s).is_err());
    assert!(substitute("up{instance=~\"${interface\"}", &s).is_err());
}

#[test]
fn finds_targets_in_collapsed_rows() -> Result<()> {
    let d = Dashboard::parse(
        r#"{"panels": [
            {"id": 1, "type": "timeseries", "title": "top",
             "targets": [{"refId": "A", "expr": "up"}]},
            {"id": 2, "type": "row", "title": "row", "collapsed": true, "panels": [
                {"id": 3, "type": "stat", "title": "nested",
                 "datasource": {"type": "prometheus", "uid": "${datasource}"},
                 "targets": [{"refId": "B", "expr": "x[$__rate_interval]", "instant": true,
                              "datasource": {"uid": "${datasource}"}}]}]}],
            "templating": {"list": [
              {"name": "datasource", "type": "datasource", "query": "prometheus"},
              {"name": "interface", "type": "query", "multi": true, "includeAll": true,
               "allValue": ".*", "query": {"query": "label_values(m, interface)"}}]}}"#,
    )?;
    let targets = d.targets();
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[1].panel_title, "nested");
    assert_eq!(targets[1].datasource_uid(), Some(DATASOURCE_UID));
    assert_eq!(targets[1].panel_datasource_uid(), Some(DATASOURCE_UID));
    assert!(targets[1].instant);
    assert_eq!(targets[0].datasource_uid(), None);
    let queries = d.queries(&Substitutions::default())?;
    assert_eq!(queries[1].expr, "x[60s]");
    let iface = d.variable("interface").context("no interface variable")?;
    assert_eq!(iface.query, "label_values(m, interface)");
    assert!(iface.multi && iface.include_all);
    assert_eq!(
        d.variable("datasource").map(|v| v.query),
        Some("prometheus".to_owned())
    );
    Ok(())
}
