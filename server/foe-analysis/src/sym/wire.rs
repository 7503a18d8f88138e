//! The wire format of terms: they cross to the solver process as JSON, each shared node written once.

use super::*;
use serde::{Deserializer, Serializer};
use std::cell::RefCell;

thread_local! {
    /// While serialising under [`with_wire_tables`]: the post-order number of every node written so far, by
    /// fingerprint (structurally equal nodes are one node).
    static WRITTEN: RefCell<FingerprintMap<u32>> = RefCell::new(FingerprintMap::default());
    /// While deserialising under [`with_wire_tables`]: the nodes read so far, in post-order.
    static READ: RefCell<Vec<Expr>> = const { RefCell::new(Vec::new()) };
}

/// A node on the wire: its definition the first time, a reference to its post-order number after that, so a
/// DAG with sharing stays the size of the DAG.
#[derive(Serialize, Deserialize)]
enum WireNode<K> {
    #[serde(rename = "d")]
    Def(K),
    #[serde(rename = "r")]
    Ref(u32),
}

/// Runs `f` (one serialisation or deserialisation of a message holding terms) with fresh node tables, so that
/// references are numbered within the message.
pub fn with_wire_tables<T>(f: impl FnOnce() -> T) -> T {
    let clear = || {
        WRITTEN.with(|w| w.borrow_mut().clear());
        READ.with(|r| r.borrow_mut().clear());
    };
    clear();
    let out = f();
    clear();
    out
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let key = self.0.fingerprint;
        if let Some(id) = WRITTEN.with(|w| w.borrow().get(&key).copied()) {
            return WireNode::<&Kind>::Ref(id).serialize(serializer);
        }
        let done = WireNode::Def(&self.0.kind).serialize(serializer)?;
        // Numbered after its children, as the reader pushes it.
        WRITTEN.with(|w| {
            let mut w = w.borrow_mut();
            let id = w.len() as u32;
            w.insert(key, id);
        });
        Ok(done)
    }
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Expr, D::Error> {
        match WireNode::<Kind>::deserialize(deserializer)? {
            WireNode::Ref(id) => READ
                .with(|r| r.borrow().get(id as usize).cloned())
                .ok_or_else(|| serde::de::Error::custom(format!("unknown term reference {id}"))),
            WireNode::Def(kind) => {
                let e = mk(kind);
                READ.with(|r| r.borrow_mut().push(e.clone()));
                Ok(e)
            }
        }
    }
}
