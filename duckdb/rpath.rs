//! The build script of every crate that links DuckDB (duckdb-files, hcs20,
//! generator, api, tests; each names this file as `build` in its
//! Cargo.toml).
//!
//! duckdb-files, which declares DuckDB's C API, links `libduckdb.so` from
//! `DUCKDB_LIB_DIR` (or, without it, from the system's library folders).
//! Finding it at run time is the loader's business, which would need
//! `LD_LIBRARY_PATH`. So the binaries and test executables carry a run path
//! instead, searched in this order:
//!
//! 1. `$ORIGIN`: the folder the executable is in. `make install` puts
//!    `libduckdb.so` beside the binaries, so an installed folder can be
//!    copied to a server as it is.
//! 2. `DUCKDB_LIB_DIR`, when set: the cache the Makefile fetched the
//!    library into, for binaries run from cargo's target folder.
//!
//! With the `bundled` fallback DuckDB is linked statically and the run path
//! is never consulted.

use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DUCKDB_LIB_DIR");
    let bundled = env::var_os("CARGO_FEATURE_BUNDLED").is_some();
    if env::var("CARGO_PKG_NAME").as_deref() == Ok("duckdb-files") && !bundled {
        if let Ok(dir) = env::var("DUCKDB_LIB_DIR") {
            println!("cargo:rustc-link-search=native={dir}");
        }
        println!("cargo:rustc-link-lib=dylib=duckdb");
    }
    let origin = match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("linux") | Ok("freebsd") | Ok("netbsd") | Ok("openbsd") => "$ORIGIN",
        Ok("macos") => "@loader_path",
        _ => return,
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{origin}");
    if let Ok(dir) = env::var("DUCKDB_LIB_DIR") {
        if !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
