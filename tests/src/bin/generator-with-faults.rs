//! The `generator` with the fault point named by `ALMANAC_FAULT` armed
//! (`shared::fault`): the crash-safety tests run it. Never installed.

fn main() -> anyhow::Result<()> {
    if let Ok(point) = std::env::var(tests::process::FAULT) {
        shared::fault::arm(&point);
    }
    generator::command::main()
}
