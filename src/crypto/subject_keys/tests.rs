//! The key store on a real (SQLite) database, and the sealed form.

use super::*;
use crate::crypto::fields::generate_key_hex;

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn store() -> Result<(tempfile::TempDir, SubjectKeys), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open_sqlite(dir.path()).await?;
    let keys = SubjectKeys::new(db, FieldCipher::parse(&generate_key_hex())?);
    Ok((dir, keys))
}

const NOW: &str = "2027-01-15T08:00:00Z";

#[tokio::test]
async fn a_sealed_field_opens_until_its_subject_key_is_destroyed() -> TestResult {
    let (_dir, keys) = store().await?;
    let key = keys.create("u1", NOW).await?;
    let sealed = key.seal("u1", "ada@example.com");
    assert!(sealed.starts_with(SEALED_PREFIX) && !sealed.contains("ada"));
    assert_eq!(sealed_subject(&sealed), Some("u1"));
    assert_eq!(
        keys.reveal(&sealed).await?,
        Revealed::Plain("ada@example.com".to_owned())
    );
    // A second create keeps the first key: old fields still open.
    keys.create("u1", NOW).await?;
    assert_eq!(
        keys.reveal(&sealed).await?,
        Revealed::Plain("ada@example.com".to_owned())
    );
    assert!(keys.destroy("u1").await?);
    assert!(!keys.destroy("u1").await?);
    assert!(keys.get("u1").await?.is_none());
    assert_eq!(keys.reveal(&sealed).await?, Revealed::Erased);
    Ok(())
}

#[tokio::test]
async fn the_table_holds_the_key_only_wrapped() -> TestResult {
    let (_dir, keys) = store().await?;
    let key = keys.create("u1", NOW).await?;
    let wrapped: String = with_pool!(keys.db.reader(), pool => {
        sqlx::query_scalar("SELECT wrapped_key FROM subject_keys WHERE subject = 'u1'")
            .fetch_one(pool)
            .await?
    });
    assert!(!wrapped.contains(&hex::encode(key.0)));
    // Another field key cannot unwrap it.
    let other = SubjectKeys::new(keys.db.clone(), FieldCipher::parse(&generate_key_hex())?);
    assert!(matches!(
        other.get("u1").await,
        Err(SubjectKeyError::Unwrap { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn keys_are_per_subject_and_read_in_bulk() -> TestResult {
    let (_dir, keys) = store().await?;
    let one = keys.create("u1", NOW).await?;
    keys.create("u2", NOW).await?;
    let found = keys.get_many(&["u1", "u2", "u3", "u1"]).await?;
    assert_eq!(found.len(), 2);
    // u2's key does not open u1's field, nor does a field moved to u2.
    let sealed = one.seal("u1", "Ada");
    assert!(reveal(&sealed, found.get("u2")).is_err());
    let moved = sealed.replacen("u1", "u2", 1);
    assert!(reveal(&moved, found.get("u2")).is_err());
    assert!(reveal(&moved, Some(&one)).is_err());
    assert_eq!(
        reveal(&sealed, found.get("u1"))?,
        Revealed::Plain("Ada".to_owned())
    );
    Ok(())
}

#[test]
fn plain_values_read_as_they_are() -> TestResult {
    assert_eq!(
        reveal("ada@example.com", None)?,
        Revealed::Plain("ada@example.com".to_owned())
    );
    assert_eq!(sealed_subject("ada@example.com"), None);
    let key = DataKey::generate();
    let mut sealed = key.seal("u1", "x");
    sealed.push('A');
    assert!(matches!(
        reveal(&sealed, Some(&key)),
        Err(SubjectKeyError::Open { .. })
    ));
    assert_eq!(format!("{key:?}"), "DataKey(..)");
    Ok(())
}

#[test]
fn the_blind_index_is_keyed_and_stable() {
    let (a, b) = (generate_key_hex(), generate_key_hex());
    let (Some(first), Some(other)) = (BlindIndex::parse(&a), BlindIndex::parse(&b)) else {
        panic!("generated keys parse");
    };
    assert_eq!(first.of("ada@example.com"), first.of("ada@example.com"));
    assert_ne!(first.of("ada@example.com"), first.of("bob@example.com"));
    assert_ne!(first.of("ada@example.com"), other.of("ada@example.com"));
    assert_eq!(first.of("x").len(), 64);
    assert!(BlindIndex::parse("zz").is_none());
}
