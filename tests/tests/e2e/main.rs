//! The end-to-end tests: the real binaries on loopback, a module per
//! subject, all in one test binary (one link for all of them).
//! `cargo test --release --test e2e <module>::` runs one subject.

mod availability;
mod broker_adapter_registry;
mod broker_api;
mod broker_bodies;
mod broker_keys_feedback;
mod broker_live;
mod broker_payments;
mod broker_registration;
mod bucket;
mod build_pipeline;
mod chat;
mod chat_access;
mod chat_bounds;
mod codemap;
mod damaged_builds;
mod duckdb;
mod egress;
mod first_run;
mod flags;
mod guard_api;
mod hcs20_api;
mod hostile_clients;
mod inscription;
mod layers;
mod openapi;
mod pages;
mod plugin_scanner;
mod plugins;
mod publish;
mod replicas;
mod replicas_behind_nginx;
mod route_table;
mod secrets;
mod secrets_chain;
mod serve;
mod skills;
mod snapshot_roundtrip;
mod static_hosts;
mod swap_under_load;
mod verification;
mod watch;
