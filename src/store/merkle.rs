//! RFC 6962 Merkle tree hashing (Certificate Transparency), used by seals.
//!
//! Leaf: `SHA-256(0x00 ‖ leaf)`; node: `SHA-256(0x01 ‖ left ‖ right)`; a tree
//! of n > 1 leaves splits at the largest power of two below n; the empty tree
//! hashes to `SHA-256("")`. Inclusion proofs are the audit paths of RFC
//! 9162 §2.1.3 (RFC 6962 §2.1.1), which decision receipts carry so that one
//! event can be checked against a seal without the seal's other events.

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

/// `SHA-256(0x00 ‖ leaf)`: a leaf's node in the tree.
pub fn leaf_hash(leaf: &Hash) -> Hash {
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

/// The audit path of leaf `index` in the tree over `leaves`: the sibling
/// tree heads from the leaf up, `PATH(m, D[n])` of RFC 9162 §2.1.3.1.
/// `None` when `index` is outside the tree.
pub fn inclusion_proof(leaves: &[Hash], index: usize) -> Option<Vec<Hash>> {
    if index >= leaves.len() {
        return None;
    }
    let mut path = Vec::new();
    let mut tree = leaves;
    let mut at = index;
    // Walk down from the root, recording the other side at each split; the
    // path lists them from the leaf up, so it is reversed at the end.
    while tree.len() > 1 {
        let split = largest_power_of_two_below(tree.len());
        let (left, right) = tree.split_at(split);
        if at < split {
            path.push(root(right));
            tree = left;
        } else {
            path.push(root(left));
            tree = right;
            at -= split;
        }
    }
    path.reverse();
    Some(path)
}

/// Whether `path` proves that `leaf` (an event hash, before leaf hashing) is
/// leaf `index` of a tree of `size` leaves with head `root`: the verification
/// algorithm of RFC 9162 §2.1.3.2.
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, path: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut hash = leaf_hash(leaf);
    for sibling in path {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            hash = node_hash(sibling, &hash);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            hash = node_hash(&hash, sibling);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && hash == *root
}

/// The tree head of leaves given one at a time, in the order of [`root`],
/// in O(log n) memory: the perfect subtrees so far, largest first. Their
/// sizes are the binary digits of n, which is how RFC 6962 splits a tree,
/// so folding them from the right gives the same head.
#[derive(Debug, Clone, Default)]
pub struct TreeBuilder {
    subtrees: Vec<(u64, Hash)>,
    leaves: u64,
}

impl TreeBuilder {
    pub fn push(&mut self, leaf: &Hash) {
        let (mut size, mut node) = (1u64, leaf_hash(leaf));
        while let Some(&(top_size, top)) = self.subtrees.last() {
            if top_size != size {
                break;
            }
            self.subtrees.pop();
            (size, node) = (size * 2, node_hash(&top, &node));
        }
        self.subtrees.push((size, node));
        self.leaves += 1;
    }

    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// What [`root`] gives for the leaves pushed so far.
    pub fn root(&self) -> Hash {
        let mut from_right = self.subtrees.iter().rev();
        match from_right.next() {
            None => Sha256::digest([]).into(),
            Some(&(_, last)) => from_right.fold(last, |right, (_, left)| node_hash(left, &right)),
        }
    }
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
    fn every_leaf_of_every_small_tree_proves_and_nothing_else_does() {
        for size in 1..=33u8 {
            let leaves: Vec<Hash> = (0..size).map(|i| [i; 32]).collect();
            let head = root(&leaves);
            for (index, leaf) in leaves.iter().enumerate() {
                let path = inclusion_proof(&leaves, index).unwrap();
                let (i, n) = (index as u64, u64::from(size));
                assert!(verify_inclusion(leaf, i, n, &path, &head), "{index}/{size}");
                assert!(!verify_inclusion(&[99; 32], i, n, &path, &head));
                assert!(!verify_inclusion(leaf, i + 1, n, &path, &head));
                if let Some(first) = path.first() {
                    let mut bent = path.clone();
                    bent[0] = [first[0] ^ 1; 32];
                    assert!(!verify_inclusion(leaf, i, n, &bent, &head));
                }
            }
            assert!(inclusion_proof(&leaves, usize::from(size)).is_none());
        }
    }

    #[test]
    fn the_builder_gives_the_head_of_every_small_tree() {
        for size in 0..=70u8 {
            let leaves: Vec<Hash> = (0..size).map(|i| [i; 32]).collect();
            let mut builder = TreeBuilder::default();
            leaves.iter().for_each(|leaf| builder.push(leaf));
            assert_eq!(builder.root(), root(&leaves), "{size} leaves");
            assert_eq!(builder.leaves(), u64::from(size));
        }
    }

    #[test]
    fn split_points() {
        assert_eq!(largest_power_of_two_below(2), 1);
        assert_eq!(largest_power_of_two_below(5), 4);
        assert_eq!(largest_power_of_two_below(8), 4);
        assert_eq!(largest_power_of_two_below(9), 8);
    }
}
