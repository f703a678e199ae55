fn main() {
    let conn = duckdb::Connection::open("/tmp/wh100.duckdb").unwrap();
    let t = |label: &str, sql: &str| {
        let start = std::time::Instant::now();
        let mut st = conn.prepare(sql).unwrap();
        let mut n = 0usize;
        for b in st.query_arrow([]).unwrap() {
            n += b.num_rows();
        }
        println!("{label}: {n} rows {:?}", start.elapsed());
    };
    conn.execute_batch(
        "CREATE OR REPLACE TEMP TABLE k AS SELECT id AS key, position FROM broker_agents USING SAMPLE 1000 ROWS",
    )
    .unwrap();
    for _ in 0..2 {
        t("ids join record", "SELECT record FROM broker_agents WHERE id IN (SELECT key FROM k)");
        t("ids join uaid only", "SELECT uaid FROM broker_agents WHERE id IN (SELECT key FROM k)");
        t("rowid subquery", "SELECT record FROM broker_agents WHERE rowid IN (SELECT rowid FROM broker_agents WHERE id IN (SELECT key FROM k))");
        t(
            "position in list",
            &format!(
                "SELECT record FROM broker_agents WHERE position IN ({})",
                (0..1000).map(|i| (i * 97).to_string()).collect::<Vec<_>>().join(",")
            ),
        );
        t("full record scan", "SELECT length(record) FROM broker_agents");
        t("3 cols", "SELECT capabilities_mask, trust_score, id FROM broker_agents");
        t("rows cols", "SELECT name, uaid, registry, protocols, trust_score, available, updated_at FROM broker_agents");
    }
}
