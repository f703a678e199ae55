//! What the generator and the api both read and write: the published
//! site's layout, manifest and index, the HTTP representations and cache
//! policies of its files, the ids written in it (ledger entities, UAIDs) and
//! its times; the special-use domain names no DNS server answers for; the
//! two process helpers both binaries run (fault points, a lowered
//! priority); and where a test finds the checkout's files. Knows nothing
//! of DuckDB, HTTP servers or the async runtime.

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

pub mod checkout;
pub mod entity;
pub mod fault;
pub mod http;
pub mod index;
pub mod manifest;
pub mod priority;
pub mod site;
pub mod special_use;
pub mod timestamp;
pub mod uaid;
