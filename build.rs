//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!`
//! embeds the migration files at compile time, and Cargo does not watch them.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
