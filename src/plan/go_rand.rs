//! Go's `math/rand` (v1) generator and `Shuffle`, reproduced bit for bit so that the
//! reconcile-mode permutation equals the CVO's for the same attempt number.

use super::go_rand_table::COOKED;

const LEN: usize = 607;
const TAP: usize = 273;
const INT32_MAX: i64 = (1 << 31) - 1;

/// `rand.New(rand.NewSource(seed))`.
#[derive(Clone)]
pub struct GoRand {
    tap: usize,
    feed: usize,
    vec: [i64; LEN],
}

fn seedrand(x: i32) -> i32 {
    const A: i32 = 48271;
    const Q: i32 = 44488;
    const R: i32 = 3399;
    let hi = x / Q;
    let lo = x % Q;
    let mut x = A.wrapping_mul(lo).wrapping_sub(R.wrapping_mul(hi));
    if x < 0 {
        x = x.wrapping_add(i32::MAX);
    }
    x
}

impl GoRand {
    /// A generator seeded like Go's `NewSource(seed)`.
    #[must_use]
    pub fn new(seed: i64) -> Self {
        let mut seed = seed % INT32_MAX;
        if seed < 0 {
            seed += INT32_MAX;
        }
        if seed == 0 {
            seed = 89_482_311;
        }
        #[allow(clippy::cast_possible_truncation)]
        let mut x = seed as i32;
        let mut vec = [0i64; LEN];
        for i in -20i32..(LEN as i32) {
            x = seedrand(x);
            if i >= 0 {
                let mut u = i64::from(x) << 40;
                x = seedrand(x);
                u ^= i64::from(x) << 20;
                x = seedrand(x);
                u ^= i64::from(x);
                #[allow(clippy::cast_sign_loss)]
                let idx = i as usize;
                u ^= COOKED[idx];
                vec[idx] = u;
            }
        }
        GoRand {
            tap: 0,
            feed: LEN - TAP,
            vec,
        }
    }

    fn uint64(&mut self) -> u64 {
        self.tap = if self.tap == 0 { LEN - 1 } else { self.tap - 1 };
        self.feed = if self.feed == 0 {
            LEN - 1
        } else {
            self.feed - 1
        };
        let x = self.vec[self.feed].wrapping_add(self.vec[self.tap]);
        self.vec[self.feed] = x;
        #[allow(clippy::cast_sign_loss)]
        let u = x as u64;
        u
    }

    /// `Int63()`.
    pub fn int63(&mut self) -> i64 {
        #[allow(clippy::cast_possible_wrap)]
        let v = (self.uint64() & ((1 << 63) - 1)) as i64;
        v
    }

    fn uint32(&mut self) -> u32 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let v = (self.int63() >> 31) as u32;
        v
    }

    fn int31n(&mut self, n: u32) -> u32 {
        let mut v = self.uint32();
        let mut prod = u64::from(v) * u64::from(n);
        #[allow(clippy::cast_possible_truncation)]
        let mut low = prod as u32;
        if low < n {
            let thresh = n.wrapping_neg() % n;
            while low < thresh {
                v = self.uint32();
                prod = u64::from(v) * u64::from(n);
                #[allow(clippy::cast_possible_truncation)]
                {
                    low = prod as u32;
                }
            }
        }
        #[allow(clippy::cast_possible_truncation)]
        let r = (prod >> 32) as u32;
        r
    }

    /// `Shuffle(n, swap)` for `n` below 2^31.
    pub fn shuffle(&mut self, n: usize, mut swap: impl FnMut(usize, usize)) {
        let mut i = n;
        while i > 1 {
            i -= 1;
            #[allow(clippy::cast_possible_truncation)]
            let j = self.int31n((i + 1) as u32) as usize;
            swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values printed by Go 1.26's math/rand for the same calls.
    #[test]
    fn matches_go_math_rand() {
        let cases: [(i64, [usize; 10], [usize; 3], i64); 4] = [
            (
                0,
                [3, 7, 4, 6, 1, 8, 0, 5, 2, 9],
                [1, 2, 0],
                8_325_060_299_420_976_708,
            ),
            (
                1,
                [1, 7, 4, 0, 9, 2, 3, 5, 8, 6],
                [2, 1, 0],
                7_504_504_064_263_669_287,
            ),
            (
                7,
                [8, 5, 3, 7, 0, 4, 6, 1, 2, 9],
                [2, 0, 1],
                3_587_514_375_585_318_182,
            ),
            (
                12345,
                [1, 3, 7, 6, 4, 0, 2, 9, 5, 8],
                [2, 0, 1],
                3_268_045_327_440_038_089,
            ),
        ];
        for (seed, ten, three, next) in cases {
            let mut r = GoRand::new(seed);
            let mut a: Vec<usize> = (0..10).collect();
            r.shuffle(a.len(), |i, j| a.swap(i, j));
            let mut b: Vec<usize> = (0..3).collect();
            r.shuffle(b.len(), |i, j| b.swap(i, j));
            assert_eq!(a, ten, "seed {seed}");
            assert_eq!(b, three, "seed {seed}");
            assert_eq!(r.int63(), next, "seed {seed}");
        }
    }
}
