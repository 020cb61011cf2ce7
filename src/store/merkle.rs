//! RFC 6962 Merkle tree hashing (Certificate Transparency), used by seals.
//!
//! Leaf: `SHA-256(0x00 ‖ leaf)`; node: `SHA-256(0x01 ‖ left ‖ right)`; a tree
//! of n > 1 leaves splits at the largest power of two below n; the empty tree
//! hashes to `SHA-256("")`.

use sha2::{Digest, Sha256};

use super::chain::Hash;

/// The Merkle tree head over `leaves`, in order.
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => Sha256::digest([]).into(),
        [leaf] => leaf_hash(leaf),
        _ => {
            let split = largest_power_of_two_below(leaves.len());
            let (left, right) = leaves.split_at(split);
            node_hash(&root(left), &root(right))
        }
    }
}

fn leaf_hash(leaf: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(leaf);
    hasher.finalize().into()
}

fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

fn largest_power_of_two_below(n: usize) -> usize {
    debug_assert!(n > 1);
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tree_is_the_hash_of_nothing() {
        assert_eq!(
            hex::encode(root(&[])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn three_leaves_split_two_and_one() {
        let leaves = [[1u8; 32], [2u8; 32], [3u8; 32]];
        let expected = node_hash(
            &node_hash(&leaf_hash(&leaves[0]), &leaf_hash(&leaves[1])),
            &leaf_hash(&leaves[2]),
        );
        assert_eq!(root(&leaves), expected);
    }

    #[test]
    fn order_matters() {
        assert_ne!(root(&[[1; 32], [2; 32]]), root(&[[2; 32], [1; 32]]));
    }

    #[test]
    fn split_points() {
        assert_eq!(largest_power_of_two_below(2), 1);
        assert_eq!(largest_power_of_two_below(5), 4);
        assert_eq!(largest_power_of_two_below(8), 4);
        assert_eq!(largest_power_of_two_below(9), 8);
    }
}
