//! Programmable Secrets' pages: the published policies, a hundred a page
//! in the catalog's order (newest on chain first), and a page per policy
//! saying what is sold, for how much, under which conditions, by whom,
//! and the commitments a buyer checks what it unlocks against.
//!
//! Both are made from the public view a catalog entry carries
//! ([`SecretPolicy::view`], the JSON `GET /programmable-secrets/policies/{id}`
//! answers): by the build from the journal's catalog, by the api from its
//! store for policies changed since. Nothing here sees a key or a
//! ciphertext. A field the view lacks fails the render (the templates'
//! undefined names are errors), so a page never silently drops a fact.
//!
//! What a provider wrote (title, description, file name, labels) is shown
//! as text, never as a link.

use minijinja::{context, Value};
use serde::Serialize;
use serde_json::Value as Json;

use broker_model::catalog::SecretPolicy;
use shared::http::Cache;
use shared::timestamp::Timestamp;

use super::{routes, Made, Page};

/// Policies one page of the list shows.
pub const PER_PAGE: usize = 100;

/// A page of the policies' list: `policies` are those of page `page` (from
/// 1) of `total`, in the catalog's order.
pub struct PolicyList<'a> {
    pub policies: &'a [SecretPolicy],
    pub page: usize,
    pub total: usize,
    /// The catalog's time (`broker_site::render::secret_policies_time`),
    /// or for the api the newest change it lists.
    pub last_modified: Timestamp,
}

/// Every page of the list of `policies` (the whole catalog, in its order),
/// and one for none.
pub(super) fn list_pages(policies: &[SecretPolicy], last_modified: Timestamp) -> Vec<Page> {
    let pages = policies.len().div_ceil(PER_PAGE).max(1);
    (1..=pages)
        .map(|page| {
            let from = ((page - 1) * PER_PAGE).min(policies.len());
            let shown = &policies[from..(from + PER_PAGE).min(policies.len())];
            let list = PolicyList { policies: shown, page, total: policies.len(), last_modified };
            list_page(&list, Made::Build)
        })
        .collect()
}

/// One page of the list.
pub(super) fn list_page(list: &PolicyList, made: Made) -> Page {
    debug_assert!(list.policies.len() <= PER_PAGE, "a page shows at most PER_PAGE policies");
    let pages = list.total.div_ceil(PER_PAGE).max(1);
    let link = |page: usize| (1..=pages).contains(&page).then(|| routes::secret_policies_page(page).0);
    let rows: Vec<Summary> = list.policies.iter().map(Summary::of).collect();
    let from = (list.page - 1) * PER_PAGE + 1;
    let (route, file) = routes::secret_policies_page(list.page);
    Page {
        route,
        file,
        template: "secrets.html",
        context: context! {
            rows, total => list.total, page => list.page, from, to => from + list.policies.len() - 1,
            previous => link(list.page - 1), next => link(list.page + 1),
        },
        json: Some(broker_site::render::SECRET_POLICIES.into()),
        last_modified: list.last_modified,
        // The catalog's policy (the api revalidates what it makes live).
        cache: Cache::Catalog,
        made,
    }
}

/// A policy's page.
pub(super) fn policy_page(policy: &SecretPolicy, made: Made) -> Page {
    let (route, file) = routes::secret_policy(policy.chain_id, policy.policy_id);
    let v = &policy.view;
    let metadata = &v["metadataJson"];
    let conditions: Vec<Value> = v["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let descriptor = &c["descriptor"];
            context! {
                words => condition_words(descriptor),
                evaluator => &c["evaluatorAddress"],
                config_hash => &c["configHash"],
                addresses => &descriptor["allowlistedBuyerAddresses"],
                description => text(&descriptor["description"]),
            }
        })
        .collect();
    let content = context! {
        file_name => text(&metadata["fileName"]),
        mime_type => text(&metadata["mimeType"]),
        size_bytes => metadata["sizeBytes"].as_u64(),
        plaintext_hash => text(&metadata["plaintextHash"]),
        cipher => text(&metadata["cipher"]["algorithm"]),
    };
    Page {
        route,
        file,
        template: "secret.html",
        context: context! {
            p => Summary::of(policy),
            v => Value::from_serialize(v),
            description => text(&metadata["description"]),
            content,
            conditions,
            ciphertext => format!("{}/policies/{}/ciphertext?chainId={}", GROUP, policy.policy_id, policy.chain_id),
            key_request => format!("{GROUP}/keys/request"),
            nonces => format!("{GROUP}/nonces"),
        },
        json: Some(format!("{GROUP}/policies/{}?chainId={}", policy.policy_id, policy.chain_id)),
        last_modified: policy.last_modified(),
        // The catalog's policy (the api revalidates what it makes live).
        cache: Cache::Catalog,
        made,
    }
}

/// The group's JSON routes' prefix.
const GROUP: &str = "/api/v1/programmable-secrets";

/// What the list and a policy's heading say of a policy.
#[derive(Serialize)]
struct Summary {
    route: String,
    title: String,
    network: String,
    chain_id: u64,
    policy_id: u64,
    /// In the chain's native currency, as a decimal (`0.01`).
    price: String,
    price_wei: String,
    conditions: Vec<String>,
    provider: String,
    provider_uaid: Option<String>,
    /// When it was made on chain (ISO 8601).
    listed: String,
    active: bool,
    key_release_ready: bool,
}

impl Summary {
    fn of(policy: &SecretPolicy) -> Summary {
        let v = &policy.view;
        let network = text(&v["network"]).unwrap_or_default();
        let title = text(&v["metadataJson"]["title"]).unwrap_or_else(|| {
            format!("Policy {} on {}", policy.policy_id, if network.is_empty() { "its chain" } else { &network })
        });
        let price_wei = text(&v["priceWei"]).unwrap_or_default();
        let conditions = v["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
        Summary {
            route: routes::secret_policy(policy.chain_id, policy.policy_id).0,
            title,
            network,
            chain_id: policy.chain_id,
            policy_id: policy.policy_id,
            price: ether(&price_wei),
            price_wei,
            conditions: conditions.iter().map(|c| condition_words(&c["descriptor"])).collect(),
            provider: text(&v["providerAddress"]).unwrap_or_default(),
            provider_uaid: text(&v["providerUaid"]),
            listed: Timestamp(policy.listed_at.max(0) as u64 * 1_000_000_000).iso8601(),
            active: v["active"].as_bool().unwrap_or(false),
            key_release_ready: v["keyReleaseReady"].as_bool().unwrap_or(false),
        }
    }
}

/// A string of the view, or `None` for anything else (absent, null, an
/// empty string).
fn text(value: &Json) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// Wei as a decimal of the native unit (10^18 wei), trailing zeros
/// dropped: `10000000000000000` is `0.01`. Anything not a whole number of
/// wei is shown as it is.
fn ether(wei: &str) -> String {
    if wei.is_empty() || !wei.bytes().all(|b| b.is_ascii_digit()) {
        return wei.to_string();
    }
    let digits = wei.trim_start_matches('0');
    let padded = format!("{digits:0>19}");
    let (whole, fraction) = padded.split_at(padded.len() - 18);
    let fraction = fraction.trim_end_matches('0');
    match fraction {
        "" => whole.to_string(),
        fraction => format!("{whole}.{fraction}"),
    }
}

/// A condition's descriptor (`programmable_secrets::conditions::Descriptor`
/// as JSON) in words a buyer reads.
fn condition_words(descriptor: &Json) -> String {
    let time = |key: &str| descriptor[key].as_u64().map(|s| Timestamp(s.saturating_mul(1_000_000_000)).iso8601());
    match descriptor["kind"].as_str() {
        Some("time-range") => match (time("notBeforeUnix"), time("notAfterUnix")) {
            (Some(from), Some(until)) => format!("Purchases from {from} until {until}"),
            (Some(from), None) => format!("Purchases from {from}"),
            (None, Some(until)) => format!("Purchases until {until}"),
            (None, None) => "Purchases at any time".into(),
        },
        Some("uaid-ownership") => {
            format!("The buyer owns the agent {}", text(&descriptor["requiredBuyerUaid"]).unwrap_or_default())
        }
        Some("evm-allowlist") => {
            let n = descriptor["allowlistedBuyerAddresses"].as_array().map_or(0, Vec::len);
            format!("The buyer is one of {n} allowed {}", if n == 1 { "address" } else { "addresses" })
        }
        Some("custom-static") => match text(&descriptor["label"]) {
            Some(label) => format!("{label} (a custom evaluator)"),
            None => format!(
                "A custom evaluator at {}",
                text(&descriptor["evaluatorAddress"]).unwrap_or_else(|| "an unnamed address".into())
            ),
        },
        _ => "A condition this page cannot describe".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A policy's view with the fields the api's has (its values made up).
    fn policy(policy_id: u64, title: &str) -> SecretPolicy {
        let address = |n: u64| format!("0x{n:040x}");
        let hash = |n: u64| format!("0x{n:064x}");
        SecretPolicy {
            chain_id: 31337,
            policy_id,
            listed_at: 1_700_000_000 + policy_id as i64,
            view: json!({
                "id": format!("staged-{policy_id}"), "network": "localhost", "chainId": 31337,
                "policyId": policy_id, "datasetId": policy_id, "conditionsHash": hash(1), "conditionCount": 1,
                "conditions": [{"index": 0, "evaluatorAddress": address(7), "configHash": hash(2),
                    "configDataHex": "0x", "descriptor": {"kind": "evm-allowlist",
                    "allowlistedBuyerAddresses": [address(8)]}, "runtimeWitness": {"kind": "none"}}],
                "declaredConditions": [], "status": "indexed", "providerAddress": address(1),
                "payoutAddress": address(2), "paymentToken": address(0), "priceWei": "10000000000000000",
                "expiresAt": null, "expiresAtUnix": null, "active": true, "allowlistEnabled": false,
                "receiptTransferable": false, "ciphertextHash": hash(3), "keyCommitment": hash(4),
                "metadataHash": hash(5), "providerUaid": "uaid:aid:provider", "providerUaidHash": hash(6),
                "metadataJson": {"title": title, "description": "Rows of data", "fileName": "data.csv",
                    "mimeType": "text/csv", "sizeBytes": 1234, "plaintextHash": hash(9),
                    "cipher": {"algorithm": "AES-GCM", "ivBase64": "AAAAAAAAAAAAAAAA", "version": 1}},
                "keyReleaseReady": true, "createdTxHash": hash(10), "createdBlockNumber": 12,
                "policyCreatedAt": "2023-11-14T22:13:20.000Z", "confirmedAt": null, "indexedAt": null,
                "createdAt": "2023-11-14T22:13:20.000Z", "updatedAt": "2023-11-15T00:00:00.000Z",
                "lastError": null, "contractAddress": address(3), "paymentModuleAddress": address(3),
                "policyVaultAddress": address(4), "accessReceiptAddress": address(5),
            }),
        }
    }

    fn body(file: &shared::site::File) -> &str {
        std::str::from_utf8(&file.representation.body).unwrap()
    }

    /// 250 policies: three pages of the list linked in order, a page for
    /// each policy, what a provider wrote escaped.
    #[test]
    fn the_list_is_paged_and_every_policy_has_a_page() {
        let mut policies: Vec<SecretPolicy> =
            (1..=250).map(|id| policy(id, if id == 7 { "<script>x</script>" } else { "Weather" })).collect();
        SecretPolicy::order(&mut policies);
        let files = crate::Renderer::new(false, true).secret_policies(&policies, Timestamp(5)).unwrap();
        assert_eq!(files.len(), 3 + 250);
        let file = |route: &str| files.iter().find(|f| f.route == route).unwrap_or_else(|| panic!("{route}"));
        let first = body(file("/secrets"));
        assert!(first.contains("Policies 1 to 100 of 250"), "{first}");
        assert!(first.contains(r#"rel="next" href="/secrets/page/2""#) && !first.contains(r#"rel="prev""#));
        assert!(first.contains(r#"href="/secrets/31337/250""#), "newest on chain first");
        let last = body(file("/secrets/page/3"));
        assert!(last.contains("Policies 201 to 250 of 250") && !last.contains(r#"rel="next""#));
        assert!(last.contains(r#"rel="prev" href="/secrets/page/2""#));
        let seven = body(file("/secrets/31337/7"));
        assert!(seven.contains("&lt;script&gt;x&lt;/script&gt;") && !seven.contains("<script>"));
        for fact in ["0.01 in the chain", "The buyer is one of 1 allowed address", "data.csv", "1,234 bytes"] {
            assert!(seven.contains(fact), "{fact}");
        }
        assert!(seven.contains("/api/v1/programmable-secrets/policies/7/ciphertext?chainId=31337"));
        let updated = policies.iter().find(|p| p.policy_id == 7).unwrap().last_modified();
        assert_eq!(file("/secrets/31337/7").representation.last_modified, updated);
        assert_eq!(file("/secrets").representation.last_modified, Timestamp(5));
    }

    #[test]
    fn no_policy_is_one_page_that_says_so() {
        let files = crate::Renderer::new(false, true).secret_policies(&[], Timestamp(5)).unwrap();
        assert_eq!(files.iter().map(|f| f.route.as_str()).collect::<Vec<_>>(), ["/secrets"]);
        assert!(body(&files[0]).contains("No policy is published yet."));
    }

    #[test]
    fn wei_as_the_native_unit() {
        for (wei, shown) in [
            ("10000000000000000", "0.01"),
            ("1000000000000000000", "1"),
            ("1500000000000000000", "1.5"),
            ("1", "0.000000000000000001"),
            ("0", "0"),
            ("000123000000000000000000", "123"),
            ("000123000000000000000", "0.123"),
            ("79228162514264337593543950335", "79228162514.264337593543950335"),
            ("", ""),
            ("1e18", "1e18"),
        ] {
            assert_eq!(ether(wei), shown, "{wei}");
        }
    }

    #[test]
    fn conditions_in_words() {
        for (descriptor, words) in [
            (
                json!({"kind": "time-range", "notBeforeUnix": 0, "notAfterUnix": 86400}),
                "Purchases from 1970-01-01T00:00:00.000Z until 1970-01-02T00:00:00.000Z",
            ),
            (json!({"kind": "time-range", "notAfterUnix": 86400}), "Purchases until 1970-01-02T00:00:00.000Z"),
            (json!({"kind": "time-range"}), "Purchases at any time"),
            (
                json!({"kind": "uaid-ownership", "requiredBuyerUaid": "uaid:aid:x"}),
                "The buyer owns the agent uaid:aid:x",
            ),
            (
                json!({"kind": "evm-allowlist", "allowlistedBuyerAddresses": ["0x1"]}),
                "The buyer is one of 1 allowed address",
            ),
            (
                json!({"kind": "evm-allowlist", "allowlistedBuyerAddresses": ["0x1", "0x2"]}),
                "The buyer is one of 2 allowed addresses",
            ),
            (
                json!({"kind": "custom-static", "evaluatorAddress": "0xab", "configDataHex": "0x"}),
                "A custom evaluator at 0xab",
            ),
            (
                json!({"kind": "custom-static", "evaluatorAddress": "0xab", "configDataHex": "0x", "label": "KYC"}),
                "KYC (a custom evaluator)",
            ),
            (json!(null), "A condition this page cannot describe"),
        ] {
            assert_eq!(condition_words(&descriptor), words, "{descriptor}");
        }
    }
}
