//! The published build's reviewed Guard campaigns, with which a stored
//! plugin's listing becomes what clients read (`plugins::catalog`: the
//! catalog's item, the detail, trust). Trust is computed when asked, so a
//! campaign reviewed or an ownership proven since the import counts at
//! once.

use plugins::catalog::{self, Listing};
use plugins::trust::{self, Trust};
use serde_json::Value;

use crate::request::Request;

/// What trust is computed with, besides the listing.
pub struct Context {
    campaigns: Vec<trust::Campaign>,
}

impl Context {
    /// The reviewed campaigns of the build `request` is answered from.
    pub fn of(request: &Request) -> Context {
        Context { campaigns: campaigns(request.build.as_ref().and_then(|b| b.guard.as_ref()).map(|g| &g.datasets)) }
    }

    pub fn trust(&self, listing: &Listing) -> Trust {
        catalog::trust(listing, &self.campaigns)
    }

    pub fn item(&self, listing: &Listing) -> Value {
        catalog::item(listing, &self.campaigns)
    }

    pub fn detail(&self, listing: &Listing) -> Value {
        catalog::detail(listing, &self.campaigns)
    }
}

/// The reviewed campaigns of `datasets`, as trust reads them.
pub fn campaigns(datasets: Option<&guard_data::Datasets>) -> Vec<trust::Campaign> {
    let Some(datasets) = datasets else { return Vec::new() };
    let campaigns = &datasets.campaigns.campaigns;
    campaigns.iter().map(|c| trust::Campaign::new(&c.id, &c.name, c.severity.as_str(), &c.surfaces)).collect()
}
