//! `generator`: builds the site from sources (`almanac::command`).

fn main() -> anyhow::Result<()> {
    almanac::command::main()
}
