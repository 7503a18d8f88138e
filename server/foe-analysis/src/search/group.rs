//! One group of candidates searched together: their neighbourhoods in rounds of growing size, all points of a
//! round in one batch of runs (in slices, so that time-outs, crashes and the work budget stop it early), each
//! candidate judged in search order, and its best divergences reported.

use super::*;

/// Runs the neighbourhoods of one group of candidates in rounds of growing size (1, 8, 64, ... points per
/// candidate), dropping candidates whose search is over.
pub(super) fn search_group(
    runner: &mut Runner,
    sig: &FunctionSignature,
    group: &[&Input],
    first_index: usize,
    cfg: &AnalysisConfig,
    special: bool,
    state: &mut SearchState<'_>,
) -> Result<(), ExecError> {
    let mut cands: Vec<CandidateState> = group
        .iter()
        .map(|&c| CandidateState {
            complete: neighbourhood_size(sig, cfg) <= 1,
            points: vec![c.clone()],
            next: 0,
            best: None,
            best_result: None,
            done: false,
        })
        .collect();
    let mut search = GroupSearch {
        runner,
        sig,
        cfg,
        special,
        runs: Vec::new(),
        index: HashMap::new(),
    };
    let mut round_end = 1usize;
    loop {
        // The first round always runs (every candidate itself); later ones only within the work budget.
        if round_end > 1 && state.out_of_budget() {
            state.out_of_time = true;
            break;
        }
        search.extend(&mut cands, round_end, state);
        let batch = search.round_inputs(&cands, round_end);
        let cut = search.run_round(batch, state)?;
        let active = search.judge_round(&mut cands, round_end, state);
        if !active || cut || state.hopeless() {
            break;
        }
        round_end = round_end.saturating_mul(8);
    }
    search.report(&cands, first_index, state);
    Ok(())
}

/// The search of one group of candidates: what it runs with, and every run so far.
struct GroupSearch<'a> {
    runner: &'a mut Runner,
    sig: &'a FunctionSignature,
    cfg: &'a AnalysisConfig,
    /// Whether the candidates are special-value inputs rather than solver candidates.
    special: bool,
    /// Every input run, with its runs on both builds.
    runs: Vec<(Input, RawPair)>,
    /// Index into `runs` by input key.
    index: HashMap<Vec<u64>, usize>,
}

impl GroupSearch<'_> {
    /// Makes each active candidate's neighbourhood up to `round_end` points (a round at a time: most candidates
    /// are done after a few rounds), counting the work of making them.
    fn extend(&self, cands: &mut [CandidateState], round_end: usize, state: &mut SearchState<'_>) {
        let dims = self.sig.searchable_params().count();
        let size = neighbourhood_size(self.sig, self.cfg);
        for c in cands.iter_mut().filter(|c| !c.done && !c.complete) {
            if c.points.len() >= round_end {
                continue;
            }
            c.points = neighbourhood_prefix(self.sig, &c.points[0], self.cfg, round_end);
            c.complete = c.points.len() < round_end || round_end >= size;
            state.work_ns += work::neighbourhood_work(c.points.len(), dims);
        }
    }

    /// This round's new inputs from every active candidate (points before `round_end`), each once.
    fn round_inputs(&self, cands: &[CandidateState], round_end: usize) -> Vec<Input> {
        let mut batch: Vec<Input> = Vec::new();
        let mut batch_keys: HashSet<Vec<u64>> = HashSet::new();
        for c in cands.iter().filter(|c| !c.done) {
            for point in &c.points[c.next.min(c.points.len())..round_end.min(c.points.len())] {
                let key = point.key();
                if !self.index.contains_key(&key) && batch_keys.insert(key) {
                    batch.push(point.clone());
                }
            }
        }
        batch
    }

    /// Runs one round's `batch` and records its runs; whether the round was cut short (too many time-outs, or
    /// the work budget).
    fn run_round(
        &mut self,
        mut batch: Vec<Input>,
        state: &mut SearchState<'_>,
    ) -> Result<bool, ExecError> {
        let (results, stop_after) = run_in_slices(self.runner, self.sig, &batch, state)?;
        let cut = stop_after < batch.len();
        batch.truncate(stop_after);
        if !batch.is_empty() {
            state.executions += results.len();
            for (input, pair) in batch.into_iter().zip(results) {
                self.record(input, pair, state);
            }
        }
        Ok(cut)
    }

    /// Counts how the runs of `input` ended, collects the plain build's exceptions inside the domain, and keeps
    /// the runs.
    fn record(&mut self, input: Input, pair: RawPair, state: &mut SearchState<'_>) {
        let (runner, sig) = (&*self.runner, self.sig);
        for run in [&pair.p, &pair.pp] {
            describe_end(runner, sig, run.end, state);
        }
        if state.in_domain(&input) {
            collect_plain(
                runner,
                sig,
                &input,
                &pair,
                &mut state.plain,
                &mut state.plain_seen,
            );
        }
        self.index.insert(input.key(), self.runs.len());
        self.runs.push((input, pair));
    }

    /// Judges the round's points of each active candidate, in order; whether any candidate is still active.
    fn judge_round(
        &self,
        cands: &mut [CandidateState],
        round_end: usize,
        state: &mut SearchState<'_>,
    ) -> bool {
        let mut active = false;
        for c in cands.iter_mut().filter(|c| !c.done) {
            self.judge_candidate(c, round_end, state);
            active |= !c.done;
        }
        active
    }

    /// Judges one candidate's points up to `round_end`, keeping its best divergences; a solver candidate is done
    /// once an `appears` divergence inside the domain is found, any candidate once its neighbourhood is exhausted.
    fn judge_candidate(
        &self,
        c: &mut CandidateState,
        round_end: usize,
        state: &mut SearchState<'_>,
    ) {
        let hi = round_end.min(c.points.len());
        for pos in c.next..hi {
            let Some(&run) = self.index.get(&c.points[pos].key()) else {
                continue;
            };
            let (input, pair) = &self.runs[run];
            if !pair.p.completed() || !pair.pp.completed() || pair.p.truncated || pair.pp.truncated
            {
                continue;
            }
            let inside = state.in_domain(input);
            let outputs_agree = self.judge_outputs(c, run, pos, inside);
            let kp: Vec<u8> = pair.p.kinds().collect();
            let kpp: Vec<u8> = pair.pp.kinds().collect();
            let Some((first, class)) = compare_kinds(&kp, &kpp) else {
                if outputs_agree
                    && (self.special || pos == 0)
                    && state.agreed_seen.insert(input.key())
                {
                    state.agreed.push(input.clone());
                }
                continue;
            };
            let rank = (!inside, class.rank(), pos);
            if c.best.as_ref().is_none_or(|b| rank < b.rank) {
                c.best = Some(Best {
                    rank,
                    run,
                    first,
                    class,
                });
            }
            // A solver candidate is done at its first divergence that appears. A special or model candidate's
            // neighbourhood runs whole: its agreed inputs go to the shipped sweep, and the one only the shipped
            // code generation parts on often comes after a neighbour at a subnormal that diverges at once.
            if class == DivergenceClass::Appears && inside && !self.special {
                c.done = true;
                break;
            }
        }
        c.next = hi;
        if c.complete && c.next >= c.points.len() {
            c.done = true;
        }
    }

    /// Compares the outputs (or endings) of the completed runs `run`, at position `pos` of candidate `c`, keeping
    /// the candidate's best result divergence; whether they agree.
    fn judge_outputs(&self, c: &mut CandidateState, run: usize, pos: usize, inside: bool) -> bool {
        let (runner, sig) = (&*self.runner, self.sig);
        let (input, pair) = &self.runs[run];
        let mut outputs_agree = false;
        if pair.p.returned() && pair.pp.returned() {
            let (end_p, end_pp) = runner.results(sig, input, pair);
            let differ = results::compare(&end_p, &end_pp, self.cfg.accuracy_bits);
            outputs_agree = differ.is_none();
            if let Some(d) = differ {
                c.offer_result((!inside, d.class.rank(), pos), run, d.class);
            }
        } else if pair.p.completed() && pair.pp.completed() {
            // One build stops at a call foe does not run (an error handler) where the other returns.
            let (end_p, end_pp) = (runner.end(sig, pair.p.end), runner.end(sig, pair.pp.end));
            outputs_agree = !results::endings_differ(&end_p, &end_pp);
            if !outputs_agree {
                let class = DivergenceClass::Ending;
                c.offer_result((!inside, class.rank(), pos), run, class);
            }
        }
        outputs_agree
    }

    /// Reports each candidate's best divergences into `state.found` (its best exception divergence, and its
    /// best result divergence on another input), and counts the diff-producing ones.
    fn report(
        &mut self,
        cands: &[CandidateState],
        first_index: usize,
        state: &mut SearchState<'_>,
    ) {
        for (i, c) in cands.iter().enumerate() {
            // A special-value input is not a solver candidate (Table III counts those).
            if c.best.is_some() && !self.special {
                state.diff_producing += 1;
            }
            let result_run = c.best_result.as_ref().map(|b| b.run);
            for b in c.best.iter().chain(
                c.best_result
                    .as_ref()
                    .filter(|r| c.best.as_ref().is_none_or(|b| b.run != r.run)),
            ) {
                let (input, _) = &self.runs[b.run];
                let (inside, key) = (state.in_domain(input), input.key());
                let d = self.report_one(b, inside, result_run);
                state
                    .found
                    .push(((!inside, b.class.rank(), first_index + i), key, d));
            }
        }
    }

    /// The report of the best input `b`: its divergence, with the result comparison, summary and location its
    /// class calls for.
    fn report_one(&mut self, b: &Best, inside: bool, result_run: Option<usize>) -> Divergence {
        let (sig, cfg) = (self.sig, self.cfg);
        let (input, pair) = &self.runs[b.run];
        let mut d = divergence(self.runner, sig, input, pair, b.first, b.class, inside);
        // Table III counts solver candidates with an exception divergence; special inputs and result
        // divergences are findings of their own.
        d.candidates = usize::from(b.class.is_exception() && !self.special);
        if !b.class.is_exception() || result_run == Some(b.run) {
            d.result = results::compare(&d.end_p, &d.end_p_prime, cfg.accuracy_bits);
        }
        if b.class == DivergenceClass::Ending {
            d.summary = results::ending_summary(&d.end_p, &d.end_p_prime);
            d.location = results::where_endings_part(&d.end_p, &d.end_p_prime).or(d.location);
        } else if !b.class.is_exception() {
            d.summary = result_summary(&d);
            if d.location.is_none() {
                d.location =
                    results::where_values_part(self.runner, sig, input, b.class, cfg.accuracy_bits);
            }
        }
        d
    }
}

/// Runs `batch` in slices; the runs, and how many inputs of `batch` they cover.
pub(super) fn run_in_slices(
    runner: &mut Runner,
    sig: &FunctionSignature,
    batch: &[Input],
    state: &mut SearchState<'_>,
) -> Result<(Vec<RawPair>, usize), ExecError> {
    // A round runs in slices, so that runs that hang (each costing the execution time limit) or the work
    // budget stop it after the first slice rather than after thousands of inputs.
    // Slices start small and double, so a function whose runs hang stops after a few of them.
    let mut stop_after = batch.len();
    let mut results = Vec::with_capacity(batch.len());
    let mut start = 0;
    let mut slice_len = FIRST_SLICE;
    while start < batch.len() {
        if start > 0 && (state.hopeless() || state.out_of_budget()) {
            state.out_of_time |= state.out_of_budget();
            stop_after = start;
            break;
        }
        let end = (start + slice_len).min(batch.len());
        let slice = &batch[start..end];
        start = end;
        let ran = runner.run_raw(&sig.name, slice)?;
        let slice_work = charge(&ran, state);
        // The next slice doubles, but no longer than what the budget has left at this slice's work per input
        // (at least one input): runs of a few milliseconds each (a series summed to convergence) would else
        // overrun a small budget by a whole slice.
        let per_input = (slice_work / slice.len().max(1) as u64).max(1);
        let left = state
            .budget
            .map_or(u64::MAX, |b| b.work_ns.saturating_sub(state.work_ns));
        slice_len = (slice_len * 2)
            .min(RUN_SLICE)
            .min((left / per_input).max(1).try_into().unwrap_or(usize::MAX));
        for run in ran.iter().flat_map(|pair| [&pair.p, &pair.pp]) {
            count_end(run, state);
        }
        results.extend(ran);
    }
    Ok((results, stop_after))
}

/// Adds the work of `ran` (and the operations its runs checked) to the search's; the work.
pub(super) fn charge(ran: &[RawPair], state: &mut SearchState<'_>) -> u64 {
    let spent = work::pairs_work(ran, state.run_limits);
    state.work_ns += spent;
    state.ops += ran.iter().map(|pair| pair.p.ops + pair.pp.ops).sum::<u64>();
    spent
}

/// Counts how a run ended, for [`SearchState::hopeless`] (as each slice returns).
pub(super) fn count_end(run: &crate::exec::RawRun, state: &mut SearchState<'_>) {
    match run.end {
        crate::exec::RawEnd::TimedOut => state.timed_out += 1,
        _ if run.completed() => state.runs_completed += 1,
        _ => state.runs_crashed += 1,
    }
}

/// Counts a run that stopped at a call foe does not run or crashed, describing the first of each, for the
/// report (time-outs are counted by [`count_end`]).
pub(super) fn describe_end(
    runner: &Runner,
    sig: &FunctionSignature,
    end: crate::exec::RawEnd,
    state: &mut SearchState<'_>,
) {
    match end {
        crate::exec::RawEnd::TimedOut | crate::exec::RawEnd::Returned(_) => {}
        crate::exec::RawEnd::Stopped(_) => {
            state.stopped += 1;
            if state.first_stop.is_none() {
                // Named without its position: the words go into the function's notes, which a cached report moved
                // to new lines keeps as they are.
                let ended = runner.end(sig, end);
                state.first_stop = Some(ended.short().unwrap_or_else(|| ended.describe()));
            }
        }
        other => {
            state.crashed += 1;
            if matches!(other, crate::exec::RawEnd::UnknownData(_)) {
                state.unknown_data += 1;
            }
            if state.first_crash.is_none() {
                state.first_crash = Some(runner.end(sig, other).describe());
            }
        }
    }
}

struct CandidateState {
    /// The neighbourhood in search order, the candidate first, made as far as the rounds have reached.
    points: Vec<Input>,
    /// Whether `points` is the whole neighbourhood.
    complete: bool,
    /// Points before this were judged.
    next: usize,
    best: Option<Best>,
    /// The best input whose outputs differ (it may also be `best`).
    best_result: Option<Best>,
    done: bool,
}

struct Best {
    /// (outside the domain, class rank, position in the search order): smaller is better.
    rank: (bool, u8, usize),
    /// Index into the runs.
    run: usize,
    first: usize,
    class: DivergenceClass,
}

impl CandidateState {
    /// Keeps the runs `run` as the best result divergence if `rank` is better than the one kept.
    fn offer_result(&mut self, rank: (bool, u8, usize), run: usize, class: DivergenceClass) {
        if self.best_result.as_ref().is_none_or(|b| rank < b.rank) {
            self.best_result = Some(Best {
                rank,
                run,
                first: 0,
                class,
            });
        }
    }
}
