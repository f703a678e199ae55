//! What billed operations cost, in whole credits: read from a pricing
//! file (`datasets/live/pricing.json` is built in; `--pricing` names
//! another). An additional registry costs what the build's catalog
//! estimates for its network (`GET /register/additional-registries`).

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pricing {
    pub registration: Registration,
    pub update: Update,
    /// Credits one HBAR buys.
    pub credits_per_hbar: f64,
    /// What one HBAR is worth in US cents: card purchases buy
    /// `creditsPerHbar / centsPerHbar` credits a cent.
    pub cents_per_hbar: f64,
    /// Chat's prices.
    #[serde(default)]
    pub chat: Chat,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Chat {
    /// Credits for each day of history kept beyond the free window.
    pub extended_history_per_day: i64,
    /// Credits for compacting a history.
    #[serde(default = "default_compaction")]
    pub compaction: i64,
    /// Credits per thousand tokens a model-routing provider reports.
    #[serde(default = "default_per_thousand")]
    pub credits_per_thousand_tokens: f64,
}

fn default_compaction() -> i64 {
    5
}

fn default_per_thousand() -> f64 {
    1.0
}

impl Default for Chat {
    fn default() -> Chat {
        Chat {
            extended_history_per_day: 1,
            compaction: default_compaction(),
            credits_per_thousand_tokens: default_per_thousand(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    pub base: i64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Update {
    pub base: i64,
}

/// The checked-in prices.
pub const BUILT_IN: &str = include_str!("../../../datasets/live/pricing.json");

impl Pricing {
    pub fn parse(text: &str) -> Result<Pricing> {
        let pricing: Pricing = serde_json::from_str(text).context("the pricing file")?;
        let prices = [
            pricing.registration.base,
            pricing.update.base,
            pricing.chat.extended_history_per_day,
            pricing.chat.compaction,
        ];
        if prices.iter().any(|p| *p < 0) {
            bail!("the pricing file: a price is negative");
        }
        let rates = [
            ("creditsPerHbar", pricing.credits_per_hbar),
            ("centsPerHbar", pricing.cents_per_hbar),
            ("chat.creditsPerThousandTokens", pricing.chat.credits_per_thousand_tokens),
        ];
        for (name, rate) in rates {
            if !(rate.is_finite() && rate > 0.0) {
                bail!("the pricing file: {name} must be above 0");
            }
        }
        Ok(pricing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_prices_are_read_and_bad_ones_refused() {
        Pricing::parse(BUILT_IN).unwrap();
        let negative = BUILT_IN.replace("\"base\": 5", "\"base\": -5");
        assert!(Pricing::parse(&negative).is_err());
        assert!(Pricing::parse(&BUILT_IN.replace("\"creditsPerHbar\": 100", "\"creditsPerHbar\": 0")).is_err());
        assert!(Pricing::parse(&BUILT_IN.replace("\"centsPerHbar\": 17", "\"centsPerHbar\": -1")).is_err());
    }
}
