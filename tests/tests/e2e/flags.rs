//! `docs/flags.md` is made from the binaries' own command-line definitions
//! (clap's), so the table of flags cannot drift from what the binaries
//! accept. When it differs, this test writes the file anew and fails:
//! run it again (and commit the file) to pass.

use clap::CommandFactory;
use tests::workspace_root;

/// A table per command that has flags: flag and default, environment
/// variable, help.
fn table(out: &mut String, title: &str, command: &clap::Command) {
    let mut rows = String::new();
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if ["help", "version"].contains(&long) {
            continue;
        }
        let defaults: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        let flag = match defaults.is_empty() {
            true => format!("`--{long}`"),
            false => format!("`--{long}` [{}]", defaults.join(", ")),
        };
        let env = arg.get_env().map_or(String::new(), |e| format!("`{}`", e.to_string_lossy()));
        let help = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
        rows.push_str(&format!("| {flag} | {env} | {help} |\n"));
    }
    if !rows.is_empty() {
        out.push_str(&format!("\n## `{title}`\n\n| flag [default] | env | meaning |\n| --- | --- | --- |\n{rows}"));
    }
    for sub in command.get_subcommands() {
        table(out, &format!("{title} {}", sub.get_name()), sub);
    }
}

fn markdown() -> String {
    let mut out = String::from(
        "# Flags\n\nEvery flag of the two binaries, with its environment variable and default, \
         made from their command-line definitions by `tests/tests/e2e/flags.rs` (do not edit by hand).\n",
    );
    table(&mut out, "generator", &generator::command::definition());
    table(&mut out, "api", &api::config::Config::command());
    out
}

#[test]
fn the_flags_document_is_the_binaries_flags() {
    let path = workspace_root().join("docs/flags.md");
    let made = markdown();
    let held = std::fs::read_to_string(&path).unwrap_or_default();
    if held != made {
        std::fs::write(&path, &made).unwrap();
        panic!("{} was not the binaries' flags; it is written anew: run the test again", path.display());
    }
}
