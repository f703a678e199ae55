//! What a person at a terminal sees of a long run: a spinner naming the
//! step under way and the time it has taken. Away from a terminal (cron,
//! systemd, CI) there is none; the structured logs, one line per step as
//! it ends, say the same.

use std::io::IsTerminal as _;
use std::time::Duration;

pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// A spinner on stderr when it is a terminal; nothing otherwise.
    pub fn new() -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new_spinner();
        let style = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar: Some(bar) }
    }

    /// A new step is under way.
    pub fn step(&self, name: &'static str) {
        if let Some(bar) = &self.bar {
            bar.set_message(name);
        }
    }
}

impl Default for Progress {
    fn default() -> Progress {
        Progress::new()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
