//! Modelling the integer bit manipulations hashes and bit sets use (`llvm.fshl` for a rotation, `llvm.cttz`,
//! `llvm.ctpop`, `llvm.bswap`): exact on constants, an uninterpreted integer otherwise, so that the code around
//! them is modelled instead of the whole function skipped. Real clang, real Z3, as in `tests.rs`.

use super::calls::BitCall;
use super::tests::{analyse, build, model_both};
use crate::config::AnalysisConfig;

#[test]
fn bit_manipulations_on_constants_are_what_the_machine_computes() {
    let samples32: [u32; 6] = [0, 1, 0x8000_0001, 0xdead_beef, u32::MAX, 0x0001_0000];
    for &x in &samples32 {
        for s in [0u32, 1, 5, 31, 32, 37] {
            let y = x.rotate_left(7) ^ 0x1234_5678;
            assert_eq!(
                BitCall::Funnel { left: true }.on_constants(&[x as u64, x as u64, s as u64], 32),
                x.rotate_left(s % 32) as u64
            );
            let fshl = if s % 32 == 0 {
                x
            } else {
                (x << (s % 32)) | (y >> (32 - s % 32))
            };
            assert_eq!(
                BitCall::Funnel { left: true }.on_constants(&[x as u64, y as u64, s as u64], 32),
                fshl as u64
            );
            let fshr = if s % 32 == 0 {
                y
            } else {
                (x << (32 - s % 32)) | (y >> (s % 32))
            };
            assert_eq!(
                BitCall::Funnel { left: false }.on_constants(&[x as u64, y as u64, s as u64], 32),
                fshr as u64
            );
        }
        let tz = if x == 0 { 32 } else { x.trailing_zeros() };
        let lz = if x == 0 { 32 } else { x.leading_zeros() };
        assert_eq!(
            BitCall::CountZeros { trailing: true }.on_constants(&[x as u64], 32),
            tz as u64
        );
        assert_eq!(
            BitCall::CountZeros { trailing: false }.on_constants(&[x as u64], 32),
            lz as u64
        );
        assert_eq!(
            BitCall::PopCount.on_constants(&[x as u64], 32),
            x.count_ones() as u64
        );
        assert_eq!(
            BitCall::ByteSwap.on_constants(&[x as u64], 32),
            x.swap_bytes() as u64
        );
        assert_eq!(
            BitCall::BitReverse.on_constants(&[x as u64], 32),
            x.reverse_bits() as u64
        );
    }
    let x: u64 = 0x0123_4567_89ab_cdef;
    assert_eq!(
        BitCall::CountZeros { trailing: false }.on_constants(&[x], 64),
        x.leading_zeros() as u64
    );
    assert_eq!(BitCall::ByteSwap.on_constants(&[x], 64), x.swap_bytes());
    assert_eq!(BitCall::PopCount.on_constants(&[0xff], 8), 8);
}

#[test]
fn a_hash_with_a_rotation_and_a_bit_count_is_modelled_not_skipped() {
    let source = r#"
float hashed(float x, unsigned k) {
    unsigned h = (k << 5) | (k >> 27);
    h ^= (unsigned)__builtin_ctz(k | 1u) + (unsigned)__builtin_popcount(k);
    return h % 7u == 3u ? x * 1e30f : x + 1.0f;
}
"#;
    let built = build(source);
    let pair = model_both(&built, "hashed", &AnalysisConfig::default()).expect("model");
    assert!(!pair.p.is_empty() && !pair.pp.is_empty());
    // The overflow of the product is found behind the hashed branch.
    let a = analyse(source, "hashed");
    assert!(a.outcome.satisfiable > 0, "{:?}", a.outcome.formulae);
}
