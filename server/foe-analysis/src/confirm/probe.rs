//! The harness's binaries: the shipped P and P', and the cause probes, P' without one option.

use crate::report::Cause;

/// One binary of the harness: the shipped P and P', or P' with one option changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    Reference,
    Shipped,
    /// P' without what `Cause` names (for [`Cause::Optimisation`]: P''s flags without any fast-math option).
    Without(Cause),
}

impl Probe {
    /// Whether the analysed file's object needs debug info: P's and P''s traces are placed on the file's lines
    /// (and the flush-to-zero probe links P''s object). The cause probes' runs are compared with P's by their
    /// exception sets, kind sequences and outputs, never by position ([`super::decide`]), so their objects are
    /// compiled without it, which is cheaper (Box2D's `physics_world.c` 1.3-1.6 s against 1.05-1.15 s).
    pub fn needs_debug_info(self) -> bool {
        matches!(
            self,
            Probe::Reference | Probe::Shipped | Probe::Without(Cause::FlushToZero)
        )
    }
}

/// The single-option probes in the order they are tried, with the option added to P''s compile and link flags
/// (FTZ/DAZ: only to the link, where `crtfastmath.o` comes in): the negations of [`crate::fast_math::OPTIONS`].
pub const PROBES: [(Cause, &str); 7] = {
    let o = &crate::fast_math::OPTIONS;
    [
        (o[0].cause, o[0].negation),
        (o[1].cause, o[1].negation),
        (o[2].cause, o[2].negation),
        (o[3].cause, o[3].negation),
        (o[4].cause, o[4].negation),
        (o[5].cause, o[5].negation),
        (o[6].cause, o[6].negation),
    ]
};
