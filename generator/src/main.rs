//! `generator`: builds the site from sources (`generator::command`).

fn main() -> anyhow::Result<()> {
    generator::command::main()
}
