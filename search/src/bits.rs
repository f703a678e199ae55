//! A fixed-size set of agent positions, one bit each: search filters are
//! intersections and unions of these, a total is a population count, and an
//! aggregation bucket is the population count of an intersection, each a
//! pass over `n / 64` words instead of a test per agent.
//!
//! Counted by AVX-512's vector popcount or `popcnt` where the CPU has them
//! (asked at run time). [`Planes`] hold sets no two of which share a member
//! as the binary digits of their numbers: each is counted within another
//! from `log2` of their words, each word split by the planes into a leaf per
//! number, `2L - 2` ands for `L` leaves. `count_with_each` counts several
//! sets within one in one pass (an aggregation's capabilities).

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    pub fn empty(len: usize) -> Bits {
        Bits { words: vec![0; len.div_ceil(64)] }
    }

    pub fn full(len: usize) -> Bits {
        let mut bits = Bits { words: vec![u64::MAX; len.div_ceil(64)] };
        if !len.is_multiple_of(64) {
            let last = bits.words.len() - 1;
            bits.words[last] = (1u64 << (len % 64)) - 1;
        }
        bits
    }

    pub fn from_positions(len: usize, positions: impl IntoIterator<Item = usize>) -> Bits {
        let mut bits = Bits::empty(len);
        positions.into_iter().for_each(|i| bits.insert(i));
        bits
    }

    /// A set of `len` positions from its words (as [`Bits::words`] gives
    /// them); `None` when they are too few or too many, or hold a position
    /// past `len`.
    pub fn from_words(len: usize, words: impl IntoIterator<Item = u64>) -> Option<Bits> {
        let words: Vec<u64> = words.into_iter().collect();
        let spare = match (len % 64, words.last()) {
            (0, _) | (_, None) => 0,
            (used, Some(last)) => last >> used,
        };
        (words.len() == len.div_ceil(64) && spare == 0).then_some(Bits { words })
    }

    /// The set's words, 64 positions each, lowest first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    pub fn intersect(&mut self, other: &Bits) {
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a &= b);
    }

    /// The positions both `a` and `b` hold (one pass, no copy first).
    pub fn both(a: &Bits, b: &Bits) -> Bits {
        Bits { words: a.words.iter().zip(&b.words).map(|(x, y)| x & y).collect() }
    }

    /// Keeps only the positions `a` or `b` holds (one pass, no union made).
    pub fn intersect_either(&mut self, a: &Bits, b: Option<&Bits>) {
        match b {
            None => self.intersect(a),
            Some(b) => {
                self.words.iter_mut().zip(&a.words).zip(&b.words).for_each(|((w, x), y)| *w &= x | y);
            }
        }
    }

    /// Removes every position `other` holds.
    pub fn subtract(&mut self, other: &Bits) {
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a &= !b);
    }

    pub fn unite(&mut self, other: &Bits) {
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a |= b);
    }

    pub fn count(&self) -> usize {
        popcount::ones(&self.words, None)
    }

    /// The size of the intersection, without building it.
    pub fn count_with(&self, other: &Bits) -> usize {
        popcount::ones(&self.words, Some(&other.words))
    }

    /// [`Bits::count_with`] of each of `sets` (as long as this one), in one
    /// pass: a chunk of this set's words stays in the first-level cache
    /// while each set's words of it stream past (an aggregation's
    /// capabilities, each read once instead of this set once for each).
    pub fn count_with_each(&self, sets: &[&Bits]) -> Vec<usize> {
        let sets: Vec<&[u64]> = sets.iter().map(|s| &s.words[..self.words.len()]).collect();
        popcount::ones_each(&self.words, &sets)
    }

    /// The indices of the words holding a member: where a sparse set's
    /// intersections are ([`Bits::count_with_in`]).
    pub fn occupied(&self) -> Vec<u32> {
        (0..self.words.len() as u32).filter(|w| self.words[*w as usize] != 0).collect()
    }

    /// [`Bits::count_with`], reading only the words `occupied` names (all
    /// of this set's members must be in them).
    pub fn count_with_in(&self, other: &Bits, occupied: &[u32]) -> usize {
        popcount::ones_at(&self.words, &other.words, occupied)
    }

    /// Keeps only the members `keep` accepts (it sees only members).
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) {
        for (w, word) in self.words.iter_mut().enumerate() {
            let mut rest = *word;
            while rest != 0 {
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if !keep(w * 64 + bit) {
                    *word &= !(1u64 << bit);
                }
            }
        }
    }

    /// How many members come before each word: with [`Bits::rank`], a
    /// member's index among them in one step (for values listed in
    /// position order beside a set).
    pub fn ranks(&self) -> Vec<u32> {
        let mut before = 0u32;
        self.words
            .iter()
            .map(|word| {
                let at = before;
                before += word.count_ones();
                at
            })
            .collect()
    }

    /// The index of `i` among the members, in increasing order, from the
    /// set's [`Bits::ranks`]; `None` when it is not a member.
    #[inline]
    pub fn rank(&self, ranks: &[u32], i: usize) -> Option<usize> {
        let word = self.words[i / 64];
        let bit = 1u64 << (i % 64);
        (word & bit != 0).then(|| ranks[i / 64] as usize + (word & (bit - 1)).count_ones() as usize)
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, word)| {
            let mut rest = *word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
    }
}

/// The most planes a [`Planes`] is made of (31 sets).
pub const MAX_PLANES: usize = popcount::MAX_PLANES;

/// Sets no two of which share a member (the values of a field each agent
/// has at most one of), as bit planes: a member of set `v` has the binary
/// digits of `v + 1` across the planes, a member of none has 0. Counting
/// every set within another then reads `log2(sets + 1)` sets' words
/// instead of one per set: an aggregation is bound by how many words it
/// reads, not by counting them (seven registries are three planes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planes {
    planes: Vec<Bits>,
    sets: usize,
}

impl Planes {
    /// The planes of `sets` (each over as many positions); `None` when two
    /// of them share a member, or they are too many to be worth planes.
    pub fn of(sets: &[Bits]) -> Option<Planes> {
        let depth = (usize::BITS - sets.len().leading_zeros()) as usize;
        let first = sets.first()?;
        if depth > popcount::MAX_PLANES || sets.iter().any(|s| s.words.len() != first.words.len()) {
            return None;
        }
        let mut planes = vec![Bits { words: vec![0; first.words.len()] }; depth];
        let mut seen = vec![0u64; first.words.len()];
        for (v, set) in sets.iter().enumerate() {
            for (w, word) in set.words.iter().enumerate() {
                if seen[w] & word != 0 {
                    return None;
                }
                seen[w] |= word;
                for (j, plane) in planes.iter_mut().enumerate() {
                    if (v + 1) >> j & 1 == 1 {
                        plane.words[w] |= word;
                    }
                }
            }
        }
        Some(Planes { planes, sets: sets.len() })
    }

    /// How many members of each set `within` holds, in the sets' order;
    /// reading only the words `occupied` names when given (all of
    /// `within`'s members must be in them: see [`Bits::occupied`]).
    pub fn counts(&self, within: &Bits, occupied: Option<&[u32]>) -> Vec<usize> {
        let planes: Vec<&[u64]> = self.planes.iter().map(|p| p.words.as_slice()).collect();
        popcount::codes(&within.words, &planes, self.sets, occupied)
    }
}

/// Population counts: AVX-512's vector count (eight words an instruction)
/// or else the `popcnt` instruction where the CPU has them (asked at run
/// time, so one binary runs everywhere), else Rust's portable count.
/// Counting is most of an aggregation's work.
mod popcount {
    /// Returns what the first function the CPU runs gives for `args`: the
    /// one built with AVX-512's vector count, the one built with `popcnt`,
    /// else the portable one.
    macro_rules! by_cpu {
        ($avx512:ident, $popcnt:ident, $portable:ident($($arg:expr),*)) => {{
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512vpopcntdq") {
                    // Safety: the CPU has the instructions the function is built with.
                    return unsafe { $avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("popcnt") {
                    // Safety: as above.
                    return unsafe { $popcnt($($arg),*) };
                }
            }
            $portable($($arg),*)
        }};
    }

    /// The ones of `a`, or of `a & b`.
    pub fn ones(a: &[u64], b: Option<&[u64]>) -> usize {
        by_cpu!(ones_avx512, ones_popcnt, portable(a, b))
    }

    /// The ones of `a & b` in the words `at`.
    pub fn ones_at(a: &[u64], b: &[u64], at: &[u32]) -> usize {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // Safety: as above.
            return unsafe { ones_at_popcnt(a, b, at) };
        }
        portable_at(a, b, at)
    }

    /// The ones of `a & b` for each `b` of `each` (as long as `a`).
    pub fn ones_each(a: &[u64], each: &[&[u64]]) -> Vec<usize> {
        by_cpu!(ones_each_avx512, ones_each_popcnt, ones_each_any(a, each))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
    unsafe fn ones_each_avx512(a: &[u64], each: &[&[u64]]) -> Vec<usize> {
        ones_each_any(a, each)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn ones_each_popcnt(a: &[u64], each: &[&[u64]]) -> Vec<usize> {
        ones_each_any(a, each)
    }

    /// Words of `a` counted against every set before the next: 2 KiB.
    const CHUNK: usize = 256;

    #[inline(always)]
    fn ones_each_any(a: &[u64], each: &[&[u64]]) -> Vec<usize> {
        let mut counts = vec![0; each.len()];
        for start in (0..a.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(a.len());
            for (count, b) in counts.iter_mut().zip(each) {
                *count += portable(&a[start..end], Some(&b[start..end]));
            }
        }
        counts
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
    unsafe fn ones_avx512(a: &[u64], b: Option<&[u64]>) -> usize {
        portable(a, b)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn ones_popcnt(a: &[u64], b: Option<&[u64]>) -> usize {
        portable(a, b)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn ones_at_popcnt(a: &[u64], b: &[u64], at: &[u32]) -> usize {
        portable_at(a, b, at)
    }

    /// The most planes [`super::Planes`] are made of (31 sets).
    pub const MAX_PLANES: usize = 5;

    /// For each code from 1 to `codes`, the ones of `within` where the
    /// planes spell it (in the words `at` only, when given).
    pub fn codes(within: &[u64], planes: &[&[u64]], codes: usize, at: Option<&[u32]>) -> Vec<usize> {
        assert!(planes.len() <= MAX_PLANES && planes.iter().all(|p| p.len() == within.len()));
        by_cpu!(codes_avx512, codes_popcnt, codes_any(within, planes, codes, at))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
    unsafe fn codes_avx512(within: &[u64], planes: &[&[u64]], codes: usize, at: Option<&[u32]>) -> Vec<usize> {
        codes_any(within, planes, codes, at)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn codes_popcnt(within: &[u64], planes: &[&[u64]], codes: usize, at: Option<&[u32]>) -> Vec<usize> {
        codes_any(within, planes, codes, at)
    }

    /// One function per number of planes, so that each code's count is a
    /// loop the compiler makes vector instructions of.
    #[inline(always)]
    fn codes_any(within: &[u64], planes: &[&[u64]], codes: usize, at: Option<&[u32]>) -> Vec<usize> {
        let leaves = match planes.len() {
            0 => return vec![0; codes],
            1 => codes_of::<1, 2>(within, planes, at).to_vec(),
            2 => codes_of::<2, 4>(within, planes, at).to_vec(),
            3 => codes_of::<3, 8>(within, planes, at).to_vec(),
            4 => codes_of::<4, 16>(within, planes, at).to_vec(),
            _ => codes_of::<5, 32>(within, planes, at).to_vec(),
        };
        leaves[1..=codes].iter().map(|n| *n as usize).collect()
    }

    /// The word `x` split by the planes' words: leaf `c` holds the bits of
    /// `x` where the planes spell `c` (bit `j` of `c` is plane `j`'s), so
    /// `L = 2^B` leaves from `2L - 2` ands, where testing each code against
    /// every plane took `2B` operations a code.
    #[inline(always)]
    fn split<const B: usize, const L: usize>(x: u64, words: [u64; B]) -> [u64; L] {
        let mut leaves = [0u64; L];
        leaves[0] = x;
        for (j, plane) in words.iter().enumerate() {
            // Leaves 0..2^j hold the split so far; each gives its bits
            // outside plane j to itself and those inside to leaf + 2^j.
            for c in 0..1 << j {
                leaves[c + (1 << j)] = leaves[c] & plane;
                leaves[c] &= !plane;
            }
        }
        leaves
    }

    /// The ones of each leaf (see [`split`]) over `within` (in the words
    /// `at` only, when given): leaf 0 is the members of no set.
    #[inline(always)]
    fn codes_of<const B: usize, const L: usize>(within: &[u64], planes: &[&[u64]], at: Option<&[u32]>) -> [u64; L] {
        // Plain loops: a closure would be compiled apart from the caller's
        // target features, without vector counts.
        let mut counts = [0u64; L];
        if let Some(at) = at {
            for w in at {
                let w = *w as usize;
                let leaves = split::<B, L>(within[w], std::array::from_fn(|j| planes[j][w]));
                for c in 0..L {
                    counts[c] += u64::from(leaves[c].count_ones());
                }
            }
            return counts;
        }
        let planes: [&[u64]; B] = std::array::from_fn(|j| &planes[j][..within.len()]);
        for w in 0..within.len() {
            let leaves = split::<B, L>(within[w], std::array::from_fn(|j| planes[j][w]));
            for c in 0..L {
                counts[c] += u64::from(leaves[c].count_ones());
            }
        }
        counts
    }

    #[inline(always)]
    fn portable_at(a: &[u64], b: &[u64], at: &[u32]) -> usize {
        at.iter().map(|w| (a[*w as usize] & b[*w as usize]).count_ones() as usize).sum()
    }

    #[inline(always)]
    fn portable(a: &[u64], b: Option<&[u64]>) -> usize {
        match b {
            None => a.iter().map(|w| w.count_ones() as usize).sum(),
            Some(b) => a.iter().zip(b).map(|(x, y)| (x & y).count_ones() as usize).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_agree_with_a_plain_set() {
        for len in [0usize, 1, 63, 64, 65, 130, 1000] {
            let a: Vec<usize> = (0..len).filter(|i| i % 3 == 0 || i % 7 == 1).collect();
            let b: Vec<usize> = (0..len).filter(|i| i % 2 == 0).collect();
            let (x, y) = (Bits::from_positions(len, a.clone()), Bits::from_positions(len, b.clone()));
            assert_eq!(x.iter().collect::<Vec<_>>(), a, "{len}");
            assert_eq!(Bits::full(len).count(), len);
            assert_eq!(Bits::full(len).iter().collect::<Vec<_>>(), (0..len).collect::<Vec<_>>());
            let both: Vec<usize> = a.iter().copied().filter(|i| b.contains(i)).collect();
            let mut and = x.clone();
            and.intersect(&y);
            assert_eq!(and.iter().collect::<Vec<_>>(), both);
            assert_eq!(Bits::both(&x, &y), and);
            let z = Bits::from_positions(len, (0..len).filter(|i| i % 5 == 0));
            let mut either = Bits::full(len);
            either.intersect_either(&x, Some(&z));
            let mut union = x.clone();
            union.unite(&z);
            assert_eq!(either, union);
            assert_eq!(x.count_with(&y), both.len());
            assert_eq!(x.count_with_in(&y, &x.occupied()), both.len());
            assert_eq!(x.occupied().len(), x.words().iter().filter(|w| **w != 0).count());
            let mut or = x.clone();
            or.unite(&y);
            assert_eq!(or.count(), a.len() + b.len() - both.len());
            let mut removed = x.clone();
            b.iter().for_each(|i| removed.remove(*i));
            let mut less = x.clone();
            less.subtract(&y);
            assert_eq!(removed, less);
            assert_eq!(
                less.iter().collect::<Vec<_>>(),
                a.iter().copied().filter(|i| !b.contains(i)).collect::<Vec<_>>()
            );
            let mut kept = x.clone();
            kept.retain(|i| i % 2 == 1);
            assert_eq!(kept.iter().collect::<Vec<_>>(), a.iter().copied().filter(|i| i % 2 == 1).collect::<Vec<_>>());
            assert!(a.iter().all(|i| x.contains(*i)) && (0..len).filter(|i| !a.contains(i)).all(|i| !x.contains(i)));
            let ranks = x.ranks();
            for i in 0..len {
                assert_eq!(x.rank(&ranks, i), a.iter().position(|m| *m == i), "{len}: rank of {i}");
            }
        }
    }

    /// Planes count each set within another as the sets do, for every
    /// number of planes, across chunks, and so do the sets counted in one
    /// pass; sets sharing a member, or too many, get no planes.
    #[test]
    fn planes_count_as_the_sets_they_are_made_of() {
        for (sets, len) in [(1usize, 100usize), (2, 64), (3, 1000), (7, 70_001), (12, 33_000), (31, 5_000)] {
            // Position i is in set i % (sets + 2) when that is a set: some
            // positions are in none.
            let of = |v: usize| Bits::from_positions(len, (0..len).filter(|i| i % (sets + 2) == v));
            let all: Vec<Bits> = (0..sets).map(of).collect();
            let planes = Planes::of(&all).expect("disjoint sets");
            let sparse = Bits::from_positions(len, (0..len).step_by(300));
            for within in
                [Bits::full(len), Bits::empty(len), Bits::from_positions(len, (0..len).filter(|i| i % 5 != 3)), sparse]
            {
                let expected: Vec<usize> = all.iter().map(|s| s.count_with(&within)).collect();
                assert_eq!(planes.counts(&within, None), expected, "{sets} sets of {len}");
                assert_eq!(planes.counts(&within, Some(&within.occupied())), expected, "{sets} sets of {len}");
                assert_eq!(within.count_with_each(&all.iter().collect::<Vec<_>>()), expected, "{sets} sets of {len}");
            }
        }
        let overlapping = [Bits::from_positions(10, [1, 2]), Bits::from_positions(10, [2, 3])];
        assert_eq!(Planes::of(&overlapping), None);
        assert_eq!(Planes::of(&vec![Bits::empty(10); 32]), None);
        assert_eq!(Planes::of(&[]), None);
    }
}
