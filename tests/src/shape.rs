//! Wire shapes, checked the way the reference client's schemas check them:
//! a required field missing or of the wrong type is an error; extra fields
//! are allowed. The shapes of `../shared/contracts/broker.md` are written
//! down here once ([`broker`]) and every discovery answer is held to them.

use serde_json::Value;

#[derive(Clone, Debug)]
pub enum Shape {
    Str,
    Num,
    /// An integer within bounds.
    Int(i64, i64),
    Bool,
    Any,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    Arr(Box<Shape>),
    /// An object whose values all have this shape.
    Map(Box<Shape>),
    /// Fields: name, required, shape.
    Obj(Vec<(&'static str, bool, Shape)>),
    Either(Box<Shape>, Box<Shape>),
}

pub use Shape::*;

pub fn arr(s: Shape) -> Shape {
    Arr(Box::new(s))
}

pub fn map(s: Shape) -> Shape {
    Map(Box::new(s))
}

pub fn either(a: Shape, b: Shape) -> Shape {
    Either(Box::new(a), Box::new(b))
}

/// Checks `value` against `shape`; the error names the path.
pub fn check(value: &Value, shape: &Shape, path: &str) -> Result<(), String> {
    let fail = |want: &str| Err(format!("{path}: expected {want}, got {value}"));
    match shape {
        Str => {
            if value.is_string() {
                Ok(())
            } else {
                fail("a string")
            }
        }
        Num => {
            if value.is_number() {
                Ok(())
            } else {
                fail("a number")
            }
        }
        Int(lo, hi) => match value.as_i64() {
            Some(n) if (*lo..=*hi).contains(&n) => Ok(()),
            _ => fail(&format!("an integer from {lo} to {hi}")),
        },
        Bool => {
            if value.is_boolean() {
                Ok(())
            } else {
                fail("a boolean")
            }
        }
        Any => Ok(()),
        OneOf(options) => match value.as_str() {
            Some(s) if options.contains(&s) => Ok(()),
            _ => fail(&format!("one of {options:?}")),
        },
        Arr(item) => match value.as_array() {
            Some(items) => items.iter().enumerate().try_for_each(|(i, v)| check(v, item, &format!("{path}[{i}]"))),
            None => fail("an array"),
        },
        Map(item) => match value.as_object() {
            Some(fields) => fields.iter().try_for_each(|(k, v)| check(v, item, &format!("{path}.{k}"))),
            None => fail("an object"),
        },
        Obj(fields) => {
            let Some(object) = value.as_object() else { return fail("an object") };
            for (name, required, shape) in fields {
                match object.get(*name) {
                    None if *required => return Err(format!("{path}.{name}: required, missing")),
                    None => {}
                    Some(v) => check(v, shape, &format!("{path}.{name}"))?,
                }
            }
            Ok(())
        }
        Either(a, b) => check(value, a, path).or_else(|_| check(value, b, path)),
    }
}

/// The broker's shapes (`../shared/contracts/broker.md`).
pub mod broker {
    use super::*;

    fn req(name: &'static str, s: Shape) -> (&'static str, bool, Shape) {
        (name, true, s)
    }

    fn opt(name: &'static str, s: Shape) -> (&'static str, bool, Shape) {
        (name, false, s)
    }

    pub fn profile() -> Shape {
        Obj(vec![
            req("version", Str),
            req("type", Int(0, 3)),
            req("display_name", Str),
            opt("alias", Str),
            opt("bio", Str),
            opt("socials", Any),
            opt("profileImage", Str),
            opt("properties", map(Any)),
            opt("inboundTopicId", Str),
            opt("outboundTopicId", Str),
            opt(
                "aiAgent",
                Obj(vec![
                    req("type", Int(0, 1)),
                    opt("creator", Str),
                    opt("model", Str),
                    opt("capabilities", arr(Int(0, 18))),
                ]),
            ),
            opt("uaid", Str),
        ])
    }

    pub fn hit() -> Shape {
        Obj(vec![
            req("id", Str),
            req("uaid", Str),
            req("registry", Str),
            req("name", Str),
            req("capabilities", arr(either(Str, Num))),
            // Read by clients though not declared.
            req("trustScore", Num),
            opt("description", Str),
            opt("endpoints", either(map(Any), arr(Str))),
            opt("metadata", map(Any)),
            opt("profile", profile()),
            opt("protocols", arr(Str)),
            opt("adapter", Str),
            opt("originalId", Str),
            opt("communicationSupported", Bool),
            opt("routingSupported", Bool),
            opt("available", Bool),
            opt("availabilityStatus", Str),
            opt("availabilitySource", Str),
            opt("availabilityCheckedAt", Str),
            opt("availabilityLatencyMs", Num),
            opt("availabilityScore", Num),
            opt("capabilityLabels", arr(Str)),
            opt("image", Str),
            opt("createdAt", Str),
            opt("updatedAt", Str),
            opt("lastSeen", Str),
            opt("lastIndexed", Str),
        ])
    }

    pub fn search() -> Shape {
        Obj(vec![req("hits", arr(hit())), req("total", Num), req("page", Num), req("limit", Num)])
    }

    pub fn registry_search() -> Shape {
        Obj(vec![req("hits", arr(hit())), req("total", Num), opt("page", Num), opt("limit", Num)])
    }

    pub fn vector_search() -> Shape {
        Obj(vec![
            req("hits", arr(Obj(vec![req("agent", hit()), opt("score", Num), opt("highlights", Any)]))),
            req("total", Num),
            req("took", Num),
            opt("totalAvailable", Num),
            opt("visible", Num),
            opt("limited", Bool),
            opt("credits_used", Num),
        ])
    }

    pub fn facets() -> Shape {
        Obj(vec![req(
            "facets",
            arr(Obj(vec![
                req("key", Str),
                req("label", Str),
                opt("description", Str),
                req("type", OneOf(&["string", "boolean", "number"])),
                opt("adapters", arr(Str)),
                opt("options", arr(Obj(vec![req("value", Str), req("label", Str)]))),
            ])),
        )])
    }

    pub fn status() -> Shape {
        Obj(vec![
            req("storageMode", Str),
            req(
                "vectorStatus",
                Obj(vec![
                    req("enabled", Bool),
                    req("healthy", Bool),
                    req("mode", OneOf(&["disabled", "initializing", "healthy", "degraded", "error"])),
                    req("lastUpdated", Str),
                    opt("details", Any),
                    opt("lastError", Str),
                ]),
            ),
        ])
    }

    pub fn stats() -> Shape {
        Obj(vec![
            req("totalAgents", Num),
            req("registries", map(Num)),
            req("capabilities", map(Num)),
            req("lastUpdate", Str),
            req("status", Str),
        ])
    }

    pub fn strings(field: &'static str) -> Shape {
        Obj(vec![req(field, arr(Str))])
    }

    pub fn adapter_details() -> Shape {
        Obj(vec![req(
            "adapters",
            arr(Obj(vec![
                req("id", Str),
                req("name", Str),
                req("version", Str),
                req("author", Str),
                req("description", Str),
                req("supportedProtocols", arr(Str)),
                req("registryType", OneOf(&["web2", "web3", "hybrid"])),
                opt(
                    "chatProfile",
                    Obj(vec![
                        req("supportsChat", Bool),
                        opt("delivery", Str),
                        opt("transport", Str),
                        opt("streaming", Bool),
                        opt("requiresAuth", arr(Str)),
                        opt("notes", Str),
                    ]),
                ),
                req(
                    "capabilities",
                    Obj(vec![
                        req("discovery", Bool),
                        req("routing", Bool),
                        req("communication", Bool),
                        req("translation", Bool),
                        req("protocols", arr(Str)),
                    ]),
                ),
                req("enabled", Bool),
                req("priority", Num),
                req("status", OneOf(&["running", "stopped"])),
            ])),
        )])
    }

    pub fn categories() -> Shape {
        Obj(vec![req(
            "categories",
            arr(Obj(vec![
                req("id", Int(i64::MIN, i64::MAX)),
                req("network", Str),
                req("type", Str),
                req("slug", Str),
                req("name", Str),
                opt("description", Str),
                req("topicId", Str),
                req("versionTopicId", Str),
                req("createdAt", Str),
                req("updatedAt", Str),
            ])),
        )])
    }

    pub fn registry_adapters() -> Shape {
        Obj(vec![
            req("network", Str),
            req("adapters", arr(Obj(vec![req("adapterId", Str), req("adapterName", Str), req("entity", Str)]))),
        ])
    }

    pub fn resolve() -> Shape {
        Obj(vec![req("agent", hit())])
    }

    pub fn validate() -> Shape {
        Obj(vec![req("uaid", Str), req("valid", Bool), req("formats", arr(Str))])
    }

    pub fn badge() -> Shape {
        Obj(vec![
            req("schemaVersion", Int(1, 1)),
            req("label", Str),
            req("message", Str),
            req("color", Str),
            opt("style", Str),
            opt("isError", Bool),
            opt("cacheSeconds", Int(0, i64::MAX)),
        ])
    }

    pub fn additional_registries() -> Shape {
        Obj(vec![req(
            "registries",
            arr(Obj(vec![
                req("id", Str),
                req("label", Str),
                req(
                    "networks",
                    arr(Obj(vec![
                        req("key", Str),
                        opt("registryId", Str),
                        opt("networkId", Str),
                        opt("name", Str),
                        opt("chainId", Num),
                        opt("label", Str),
                        opt("estimatedCredits", Num),
                    ])),
                ),
            ])),
        )])
    }

    pub fn credit_providers() -> Shape {
        Obj(vec![req(
            "providers",
            arr(Obj(vec![
                req("name", Str),
                opt("publishableKey", Str),
                opt("currency", Str),
                opt("centsPerHbar", Num),
            ])),
        )])
    }
}
