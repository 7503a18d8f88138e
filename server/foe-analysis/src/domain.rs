//! Input domains declared in the source: `// foe: assume -4.5 <= v <= -0.3` above a function.
