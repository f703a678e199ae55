//! The `api` with the fault point named by `ALMANAC_FAULT` armed
//! (`shared::fault`): the crash-safety and swap tests run it. Never
//! installed.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    if let Ok(point) = std::env::var(tests::process::FAULT) {
        shared::fault::arm(&point);
    }
    api::command::main()
}
