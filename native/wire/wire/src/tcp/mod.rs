//! TCP: sequence arithmetic, per-direction reassembly, and flow keys.

pub mod flow;
pub mod reasm;

/// a < b in 32-bit sequence space.
#[inline]
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_order() {
        assert!(seq_lt(1, 2));
        assert!(seq_lt(u32::MAX - 5, 3));
        assert!(!seq_lt(3, u32::MAX - 5));
        assert!(!seq_lt(7, 7));
    }
}
