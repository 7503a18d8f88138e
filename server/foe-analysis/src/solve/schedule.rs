//! Which queries are solved: the paths of each operation's exception in rounds, a few per operation.
//!
//! A loop unrolled by the model or a chain of branches asks the same question (can this operation raise this
//! exception?) once per path, often hundreds of times. Solving them all in query order spends the budget on the
//! deep paths of the first operations and leaves the later ones unasked. So queries are grouped by site (build,
//! operation, source location, exception kind) and solved in rounds: round `r` solves the `r`-th path of every
//! site. A site stops after [`PATHS_PER_SITE`] paths, a path the solver gave up on counting twice; its other paths
//! are [`Covered`] when one of its paths gave an input whose rounding raises the exception (the question is
//! answered; several paths still give the search several inputs, which a reordered sum needs), else [`Capped`]
//! (reported as a cut). Each round is one deterministic batch, so the set of queries solved does not depend on
//! thread timing.
//!
//! [`Covered`]: Skip::Covered
//! [`Capped`]: Skip::Capped

use crate::model::Query;
use std::collections::{BTreeMap, VecDeque};

/// At most this many paths of one site are solved.
pub const PATHS_PER_SITE: usize = 4;

/// Why a query was not solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skip {
    /// Another path of its site already gave an input that raises the exception.
    Covered,
    /// [`PATHS_PER_SITE`] paths of its site were solved without an input.
    Capped,
}

/// How one solved query went, as far as its site is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// An input whose rounding raises the exception: the site's question is answered.
    Hit,
    /// Unsatisfiable, or an input that misses the exception.
    NoHit,
    /// The solver gave up: counts as two paths, since the next path of the site, as long or longer, rarely goes
    /// better and each give-up costs a whole query budget.
    GaveUp,
}

/// Solves `todo` (indices into `jobs`) in rounds per site; `covered` marks sites already covered by earlier
/// results. `solve_round` solves one batch and answers for each of its items. Returns what was skipped and why.
pub(super) fn in_rounds(
    jobs: &[&Query],
    todo: &[usize],
    covered: impl Fn(usize) -> bool,
    mut solve_round: impl FnMut(&[usize]) -> Vec<Answer>,
) -> Vec<(usize, Skip)> {
    let mut sites: BTreeMap<SiteKey<'_>, VecDeque<usize>> = BTreeMap::new();
    let mut first_seen: Vec<SiteKey<'_>> = Vec::new();
    for &i in todo {
        let key = site_key(jobs[i]);
        let queue = sites.entry(key).or_default();
        if queue.is_empty() {
            first_seen.push(key);
        }
        queue.push_back(i);
    }
    let mut skipped = Vec::new();
    // Sites in the order their first query comes, so rounds follow the function's text.
    let mut open: Vec<Site> = Vec::new();
    for key in first_seen {
        let queue = sites.remove(&key).unwrap_or_default();
        let covered_before = jobs
            .iter()
            .enumerate()
            .any(|(i, q)| site_key(q) == key && covered(i));
        open.push(Site {
            queue,
            tried: 0,
            hit: covered_before,
        });
    }
    loop {
        let batch: Vec<usize> = open
            .iter()
            .filter_map(|s| s.queue.front().copied())
            .collect();
        if batch.is_empty() {
            break;
        }
        let answers = solve_round(&batch);
        let mut answered = answers.into_iter();
        for site in open.iter_mut().filter(|s| !s.queue.is_empty()) {
            site.queue.pop_front();
            site.tried += match answered.next().unwrap_or(Answer::NoHit) {
                Answer::Hit => {
                    site.hit = true;
                    1
                }
                Answer::NoHit => 1,
                Answer::GaveUp => 2,
            };
            if site.tried >= PATHS_PER_SITE {
                let skip = if site.hit {
                    Skip::Covered
                } else {
                    Skip::Capped
                };
                skipped.extend(site.queue.drain(..).map(|i| (i, skip)));
            }
        }
    }
    skipped.sort_unstable_by_key(|(i, _)| *i);
    skipped
}

/// For each job, whether its site has other paths among `jobs`. Such a query gets half the time limit: the
/// site's other paths make up for a query given up on, and the site's paths together still get more than one
/// query's limit, while a site of one path (an expression without branches) has nothing to make up for it.
pub(super) fn has_other_paths(jobs: &[&Query]) -> Vec<bool> {
    let mut paths: BTreeMap<SiteKey<'_>, usize> = BTreeMap::new();
    for q in jobs {
        *paths.entry(site_key(q)).or_default() += 1;
    }
    jobs.iter().map(|q| paths[&site_key(q)] > 1).collect()
}

/// One site's paths still to solve, how many count as tried, and whether one gave an input.
struct Site {
    queue: VecDeque<usize>,
    tried: usize,
    hit: bool,
}

/// What makes two queries ask the same question on different paths: the same instruction of the same build
/// (so each lane of a vector operation is a site of its own), the same exception.
type SiteKey<'a> = (u8, u8, &'a str, Option<(u32, u32)>, u32);

fn site_key(q: &Query) -> SiteKey<'_> {
    (
        q.build as u8,
        q.kind as u8,
        q.operation.as_str(),
        q.loc.map(|l| (l.line, l.column)),
        q.instruction,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sym;
    use crate::types::{Build, ExceptionKind, SourceLoc};

    fn query(line: u32, kind: ExceptionKind) -> Query {
        Query {
            build: Build::P,
            kind,
            operation: "fmul".into(),
            loc: Some(SourceLoc { line, column: 3 }),
            instruction: 0,
            formula: sym::tru(),
        }
    }

    #[test]
    fn solves_a_few_paths_of_each_site_in_rounds() {
        use ExceptionKind::Overflow;
        // Site 10 has six paths and hits on its second; site 20 has six paths and never hits.
        let queries: Vec<Query> = [10, 20, 10, 20, 10, 20, 10, 20, 10, 20, 10, 20]
            .iter()
            .map(|&l| query(l, Overflow))
            .collect();
        let jobs: Vec<&Query> = queries.iter().collect();
        let todo: Vec<usize> = (0..jobs.len()).collect();
        let mut rounds = Vec::new();
        let skipped = in_rounds(
            &jobs,
            &todo,
            |_| false,
            |batch| {
                rounds.push(batch.to_vec());
                batch
                    .iter()
                    .map(|&i| if i == 2 { Answer::Hit } else { Answer::NoHit })
                    .collect()
            },
        );
        assert_eq!(rounds, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(
            skipped,
            vec![
                (8, Skip::Covered),
                (9, Skip::Capped),
                (10, Skip::Covered),
                (11, Skip::Capped)
            ]
        );
    }

    #[test]
    fn a_site_covered_by_an_earlier_result_is_covered_when_capped() {
        let queries: Vec<Query> = (0..6).map(|_| query(10, ExceptionKind::Overflow)).collect();
        let jobs: Vec<&Query> = queries.iter().collect();
        let mut solved = Vec::new();
        let skipped = in_rounds(
            &jobs,
            &[1, 2, 3, 4, 5],
            |i| i == 0,
            |batch| {
                solved.extend_from_slice(batch);
                vec![Answer::NoHit; batch.len()]
            },
        );
        assert_eq!(solved, vec![1, 2, 3, 4]);
        assert_eq!(skipped, vec![(5, Skip::Covered)]);
    }

    #[test]
    fn only_a_site_of_several_paths_shares_its_limit() {
        use ExceptionKind::{Overflow, Underflow};
        let queries = [
            query(10, Overflow),
            query(10, Underflow),
            query(20, Overflow),
            query(10, Overflow),
        ];
        let jobs: Vec<&Query> = queries.iter().collect();
        assert_eq!(has_other_paths(&jobs), vec![true, false, false, true]);
    }

    #[test]
    fn a_path_the_solver_gave_up_on_counts_twice() {
        let queries: Vec<Query> = (0..5).map(|_| query(10, ExceptionKind::Overflow)).collect();
        let jobs: Vec<&Query> = queries.iter().collect();
        let mut solved = Vec::new();
        let skipped = in_rounds(
            &jobs,
            &[0, 1, 2, 3, 4],
            |_| false,
            |batch| {
                solved.extend_from_slice(batch);
                vec![Answer::GaveUp; batch.len()]
            },
        );
        assert_eq!(solved, vec![0, 1]);
        assert_eq!(
            skipped,
            vec![(2, Skip::Capped), (3, Skip::Capped), (4, Skip::Capped)]
        );
    }
}
