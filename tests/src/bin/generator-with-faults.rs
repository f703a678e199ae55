//! The `generator` with the fault point named by `ALMANAC_FAULT` armed
//! (`almanac::fault`): the crash-safety tests run it. Never installed.

fn main() -> anyhow::Result<()> {
    if let Ok(point) = std::env::var(tests::process::FAULT) {
        almanac::fault::arm(&point);
    }
    almanac::command::main()
}
