//! almanac's generator library: sources, the HCS-20 rules, the warehouse,
//! the analytics queries and the site writer. The api links this library so
//! that both sides answer every query through the same functions.

/// A closed set of values spelled on the wire: an enum read and written by
/// serde as exactly these texts (anything else is refused, naming the
/// choices), `as_str` for the text, and `$all`, every text in order.
#[macro_export]
macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident, $all:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl std::str::FromStr for $name {
            type Err = ();
            /// Exactly one of the spellings.
            fn from_str(text: &str) -> Result<$name, ()> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(()),
                }
            }
        }

        /// Every spelling, in order.
        pub const $all: &[&str] = &[$($text),+];
    };
}

pub mod analysts;
pub mod broker;
pub mod build;
#[cfg(feature = "cli")]
pub mod cli;
pub mod columnar;
#[cfg(feature = "cli")]
pub mod command;
pub mod database;
pub mod entity;
pub mod fault;
pub mod guard;
pub mod hcs20;
pub mod hosts;
pub mod http;
pub mod index;
pub mod layer;
pub mod manifest;
pub mod pages;
pub mod priority;
pub mod progress;
pub mod site;
pub mod snapshot;
pub mod timestamp;
pub mod uaid;
pub mod warehouse;
