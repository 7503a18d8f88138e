// The fixture of the LSP sessions (tests/tests/lsp_e2e.rs and nvim_e2e.rs). A trailing "foe: divergence KIND"
// comment marks each line that must be flagged (KIND: the exception named by the code, or any).

// identity: fast-math folds it to `return x`, so the plain build's overflow disappears
double identity(double x) {
    double a = 2 * x; // foe: divergence overflow
    double b = a * 0.5;
    return b;
}

// foe: assume -4.5 <= v <= -0.3
// foe: assume 0.4 <= w <= 0.9
// foe: assume 3.8 <= r <= 7.8
double turbine1(double v, double w, double r) {
    return 3 + 2/(r*r) - 0.125*(3-2*v)*(w*w*r*r)/(1-v) - 4.5; // foe: divergence any
}
