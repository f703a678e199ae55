//! Best Practices (15 points): a README, the declared skills folder and
//! each skill's frontmatter, no committed `.env` files, a `.codexignore`.

use serde_json::Value;

use super::{truthy, Plugin, MANIFEST};
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "best-practices";
const ENV_FILES: [&str; 3] = [".env", ".env.local", ".env.production"];

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let skills = skills(plugin);
    vec![
        readme(plugin),
        skills_directory(&skills),
        skill_frontmatter(plugin, &skills),
        no_env_files(plugin),
        codexignore(plugin),
    ]
}

fn readme(plugin: &Plugin) -> Check {
    const NAME: &str = "README.md found";
    if plugin.tree.exists("README.md") {
        return Check::pass(NAME, 3, "README.md found");
    }
    let missing = Finding::new(
        "README_MISSING",
        Severity::Low,
        CATEGORY,
        "README.md is missing",
        "Plugins should document installation, usage, and security expectations in README.md.",
    )
    .remediation("Add a README.md that explains setup, usage, and operational constraints.")
    .file("README.md");
    Check::fail(NAME, 3, "README.md not found", vec![missing])
}

/// What the manifest's `skills` says for the two skills checks: not to
/// be checked (with why), not a string, or the folder it names (`None`
/// when it names none inside the tree).
enum Skills {
    NotApplicable(&'static str),
    NotAString,
    Folder(String, Option<String>),
}

fn skills(plugin: &Plugin) -> Skills {
    if plugin.manifest.is_none() {
        return Skills::NotApplicable("Cannot parse manifest, skipping check");
    }
    let declared = plugin.skills();
    if !truthy(declared) {
        return Skills::NotApplicable("No skills field declared, check not applicable");
    }
    match declared {
        Some(Value::String(path)) => {
            Skills::Folder(path.clone(), tree::join("", path).filter(|p| plugin.tree.is_dir(p)))
        }
        _ => Skills::NotAString,
    }
}

fn skills_directory(skills: &Skills) -> Check {
    const NAME: &str = "Skills directory exists if declared";
    match skills {
        Skills::NotApplicable(why) => Check::weightless(NAME, *why),
        Skills::NotAString => Check::fail(NAME, 3, "Manifest \"skills\" field must be a string path", vec![]),
        Skills::Folder(declared, Some(_)) => Check::pass(NAME, 3, format!("Skills directory \"{declared}\" exists")),
        Skills::Folder(declared, None) => {
            let missing = Finding::new(
                "SKILLS_DIR_MISSING",
                Severity::Medium,
                CATEGORY,
                "Declared skills directory is missing",
                format!("The manifest declares \"{declared}\" as the skills directory, but it does not exist."),
            )
            .remediation("Create the skills directory or correct the manifest path.")
            .file(MANIFEST);
            Check::fail(NAME, 3, format!("Skills directory \"{declared}\" declared but not found"), vec![missing])
        }
    }
}

/// Each `<skills>/*/SKILL.md` must open with `---`-fenced frontmatter
/// naming `name:` and `description:` (read as the reference reads it: the
/// text between the first two fences holds both strings).
fn skill_frontmatter(plugin: &Plugin, skills: &Skills) -> Check {
    const NAME: &str = "SKILL.md frontmatter";
    let folder = match skills {
        Skills::NotApplicable(why) => return Check::weightless(NAME, *why),
        // 4 points here against 3 in the folder's check: the reference's.
        Skills::NotAString => return Check::fail(NAME, 4, "Manifest \"skills\" field must be a string path", vec![]),
        Skills::Folder(_, None) => return Check::weightless(NAME, "Skills directory not found, skipping check"),
        Skills::Folder(_, Some(folder)) => folder,
    };
    let skill_files: Vec<String> = plugin
        .tree
        .children(folder)
        .into_iter()
        .map(|child| tree::join(folder, &format!("{child}/SKILL.md")).unwrap_or_default())
        .filter(|path| plugin.tree.file(path).is_some())
        .collect();
    if skill_files.is_empty() {
        return Check::weightless(NAME, "No SKILL.md files found, nothing to check");
    }
    let invalid: Vec<String> = skill_files
        .into_iter()
        .filter(|path| {
            let text = plugin.tree.text(path).unwrap_or_default();
            let mut parts = text.splitn(3, "---");
            let (_, frontmatter, rest) = (parts.next(), parts.next(), parts.next());
            match (frontmatter, rest) {
                (Some(fm), Some(_)) => !(fm.contains("name:") && fm.contains("description:")),
                _ => true,
            }
        })
        .collect();
    if invalid.is_empty() {
        return Check::pass(NAME, 3, "All SKILL.md files have valid frontmatter");
    }
    let findings = invalid
        .iter()
        .map(|path| {
            Finding::new(
                "SKILL_FRONTMATTER_INVALID",
                Severity::Medium,
                CATEGORY,
                "Skill frontmatter is invalid",
                format!("{path} is missing valid skill frontmatter."),
            )
            .remediation("Add YAML frontmatter with at least name and description fields.")
            .file(path.clone())
        })
        .collect();
    Check::fail(NAME, 3, format!("SKILL.md missing valid frontmatter in: {}", invalid.join(", ")), findings)
}

fn no_env_files(plugin: &Plugin) -> Check {
    const NAME: &str = "No .env files committed";
    let found: Vec<&str> = ENV_FILES.into_iter().filter(|f| plugin.tree.exists(f)).collect();
    if found.is_empty() {
        return Check::pass(NAME, 3, "No .env files found");
    }
    let findings = found
        .iter()
        .map(|path| {
            Finding::new(
                "ENV_FILE_COMMITTED",
                Severity::High,
                CATEGORY,
                "Environment file is committed",
                format!("The file \"{path}\" is present in the plugin directory."),
            )
            .remediation("Remove committed environment files and rely on local, ignored configuration.")
            .file(*path)
        })
        .collect();
    Check::fail(NAME, 3, format!(".env files found: {}", found.join(", ")), findings)
}

fn codexignore(plugin: &Plugin) -> Check {
    const NAME: &str = ".codexignore found";
    if plugin.tree.exists(".codexignore") {
        return Check::pass(NAME, 3, ".codexignore found");
    }
    let missing = Finding::new(
        "CODEXIGNORE_MISSING",
        Severity::Info,
        CATEGORY,
        ".codexignore is missing",
        "A .codexignore file helps prevent accidental inclusion of local artifacts and secrets.",
    )
    .remediation("Add a .codexignore file with generated assets, local state, and secret paths.")
    .file(".codexignore");
    Check::fail(NAME, 3, ".codexignore not found", vec![missing])
}
