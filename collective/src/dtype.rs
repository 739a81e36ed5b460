//! Element types: NCCL's list (int8, uint8, int32, uint32, int64, uint64, half,
//! float, double, bfloat16) as the [`Element`] trait, implemented for the matching
//! Rust types (`half::f16` and `half::bf16` for the 16-bit floats).
//!
//! Arithmetic rules (what a reference must reproduce to compare bit for bit):
//! * integers wrap on overflow (sum and product are then exact modulo 2^bits, so any
//!   reduction order gives the same answer); avg divides the wrapped sum, truncating;
//! * `f32` and `f64` use IEEE arithmetic; max/min are IEEE maxNum/minNum (`f32::max`);
//! * `f16` and `bf16` compute every binary operation in `f32` and round the result to
//!   the element type, so a chain of `n` operations rounds `n` times.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

use crate::op::ReduceOp;
use crate::reduce;

/// The runtime name of an element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    Float32,
    Float64,
    Bfloat16,
}

impl DataType {
    /// Every type, in NCCL's order.
    pub const ALL: [DataType; 10] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Bfloat16,
    ];

    /// The name nccl-tests prints in its `type` column.
    pub const fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Float16 => "half",
            DataType::Float32 => "float",
            DataType::Float64 => "double",
            DataType::Bfloat16 => "bfloat16",
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        }
    }

    /// True for the four floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(self, DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Bfloat16)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = String;
    /// Accepts nccl-tests' names and the Rust/C spellings (`f32`, `float32`, `int`...).
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "int8" | "i8" | "char" => DataType::Int8,
            "uint8" | "u8" => DataType::Uint8,
            "int32" | "i32" | "int" => DataType::Int32,
            "uint32" | "u32" => DataType::Uint32,
            "int64" | "i64" => DataType::Int64,
            "uint64" | "u64" => DataType::Uint64,
            "half" | "f16" | "float16" | "fp16" => DataType::Float16,
            "float" | "f32" | "float32" | "fp32" => DataType::Float32,
            "double" | "f64" | "float64" | "fp64" => DataType::Float64,
            "bfloat16" | "bf16" => DataType::Bfloat16,
            _ => return Err(format!("unknown data type {s:?} (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16)")),
        })
    }
}

mod sealed {
    /// Only the types of this module are elements: each is plain data without padding
    /// for which every bit pattern is a valid value, which the byte views rely on.
    pub trait Sealed {}
}

/// A type collectives can reduce. Implemented for `i8 u8 i32 u32 i64 u64 f16 f32 f64
/// bf16` only (sealed): the staging code reinterprets their bytes.
pub trait Element: sealed::Sealed + Copy + Send + Sync + PartialEq + fmt::Debug + Default + 'static {
    /// The runtime name of this type.
    const DTYPE: DataType;

    /// `a op b` for one pair (`Avg` combines as `Sum`).
    fn combine(a: Self, b: Self, op: ReduceOp) -> Self;

    /// `x / n`: the last step of `Avg`.
    fn div_n(x: Self, n: usize) -> Self;

    /// `dst[i] = a[i] op b[i]` over `dst.len()` elements (`a` and `b` at least as long).
    #[inline]
    fn reduce(dst: &mut [Self], a: &[Self], b: &[Self], op: ReduceOp) {
        reduce::zip_with(dst, a, b, op, Self::combine)
    }

    /// `dst[i] = dst[i] op b[i]`.
    #[inline]
    fn reduce_acc(dst: &mut [Self], b: &[Self], op: ReduceOp) {
        reduce::acc_with(dst, b, op, Self::combine)
    }

    /// `x[i] = x[i] / n` for every element.
    #[inline]
    fn div_all(x: &mut [Self], n: usize) {
        for v in x.iter_mut() {
            *v = Self::div_n(*v, n);
        }
    }

    /// The nearest value to `v` (test data, CLI fill values).
    fn from_f64(v: f64) -> Self;

    /// The value as `f64` (exact except for 64-bit integers beyond 2^53).
    fn to_f64(self) -> f64;
}

macro_rules! int_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            #[inline(always)]
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Max => if b > a { b } else { a },
                    ReduceOp::Min => if b < a { b } else { a },
                }
            }
            #[inline(always)]
            fn div_n(x: Self, n: usize) -> Self {
                // Truncating division; n fits every type's range only for small n, so
                // divide in 128 bits (n <= 2^31 ranks) and narrow back.
                (x as i128 / n as i128) as $t
            }
            #[inline]
            fn reduce(dst: &mut [Self], a: &[Self], b: &[Self], op: ReduceOp) {
                reduce::int_zip(dst, a, b, op)
            }
            #[inline]
            fn reduce_acc(dst: &mut [Self], b: &[Self], op: ReduceOp) {
                reduce::int_acc(dst, b, op)
            }
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
int_element!(i8 => Int8, u8 => Uint8, i32 => Int32, u32 => Uint32, i64 => Int64, u64 => Uint64);

macro_rules! float_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            #[inline(always)]
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            #[inline(always)]
            fn div_n(x: Self, n: usize) -> Self { x / n as $t }
            #[inline]
            fn reduce(dst: &mut [Self], a: &[Self], b: &[Self], op: ReduceOp) {
                reduce::float_zip(dst, a, b, op)
            }
            #[inline]
            fn reduce_acc(dst: &mut [Self], b: &[Self], op: ReduceOp) {
                reduce::float_acc(dst, b, op)
            }
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
float_element!(f32 => Float32, f64 => Float64);

macro_rules! half_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            #[inline(always)]
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                <$t>::from_f32(f32::combine(a.to_f32(), b.to_f32(), op))
            }
            #[inline(always)]
            fn div_n(x: Self, n: usize) -> Self { <$t>::from_f32(x.to_f32() / n as f32) }
            #[inline]
            fn reduce(dst: &mut [Self], a: &[Self], b: &[Self], op: ReduceOp) {
                reduce::half_zip(dst, a, b, op)
            }
            #[inline]
            fn reduce_acc(dst: &mut [Self], b: &[Self], op: ReduceOp) {
                reduce::half_acc(dst, b, op)
            }
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            fn to_f64(self) -> f64 { <$t>::to_f64(self) }
        }
    )*};
}
half_element!(f16 => Float16, bf16 => Bfloat16);

/// The bytes of a slice of elements.
#[inline]
pub fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: Element types are plain data without padding (sealed trait); the byte
    // slice covers exactly the same memory and borrows it immutably for the same life.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of elements.
#[inline]
pub fn as_bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as for as_bytes; every byte pattern is a valid value of every Element
    // type (integers, IEEE floats, f16/bf16 bit patterns), so writes of any bytes
    // through the result leave valid elements, and the borrow is exclusive as `s` was.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Runs `$body` with `$T` bound to the Rust type of the runtime [`DataType`] `$dt`.
///
/// ```
/// use collective::{dispatch_dtype, DataType, Element};
/// let size = dispatch_dtype!(DataType::Float16, T => std::mem::size_of::<T>());
/// assert_eq!(size, 2);
/// ```
#[macro_export]
macro_rules! dispatch_dtype {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::DataType::Int8 => { type $T = i8; $body }
            $crate::DataType::Uint8 => { type $T = u8; $body }
            $crate::DataType::Int32 => { type $T = i32; $body }
            $crate::DataType::Uint32 => { type $T = u32; $body }
            $crate::DataType::Int64 => { type $T = i64; $body }
            $crate::DataType::Uint64 => { type $T = u64; $body }
            $crate::DataType::Float16 => { type $T = $crate::half::f16; $body }
            $crate::DataType::Float32 => { type $T = f32; $body }
            $crate::DataType::Float64 => { type $T = f64; $body }
            $crate::DataType::Bfloat16 => { type $T = $crate::half::bf16; $body }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_parsing() {
        for d in DataType::ALL {
            assert_eq!(d.name().parse::<DataType>(), Ok(d));
            assert_eq!(dispatch_dtype!(d, T => std::mem::size_of::<T>()), d.size());
            assert_eq!(dispatch_dtype!(d, T => T::DTYPE), d);
        }
        assert_eq!("f32".parse::<DataType>(), Ok(DataType::Float32));
        assert!("complex".parse::<DataType>().is_err());
    }

    /// The names nccl-tests prints (common.cu: `test_typenames`, `test_opnames`), in
    /// NCCL's type order; the floating-point types are NCCL's half, float, double and
    /// bfloat16.
    #[test]
    fn display_names_and_kinds_are_nccl_tests_ones() {
        let types = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"];
        let floats = [false, false, false, false, false, false, true, true, true, true];
        for (i, d) in DataType::ALL.into_iter().enumerate() {
            assert_eq!(d.to_string(), types[i]);
            assert_eq!(d.is_float(), floats[i], "{d}");
        }
        let ops: Vec<String> = ReduceOp::ALL.iter().map(|o| o.to_string()).collect();
        assert_eq!(ops, ["sum", "prod", "max", "min", "avg"]);
    }

    #[test]
    fn integer_rules() {
        assert_eq!(i8::combine(100, 100, ReduceOp::Sum), -56, "wraps");
        assert_eq!(u8::combine(16, 16, ReduceOp::Prod), 0);
        assert_eq!(i32::div_n(-7, 2), -3, "truncates toward zero");
        assert_eq!(u64::div_n(u64::MAX, 3), u64::MAX / 3);
        assert_eq!(i64::combine(-1, 3, ReduceOp::Min), -1);
    }

    #[test]
    fn half_rounds_after_every_operation() {
        let a = f16::from_f32(2048.0);
        let one = f16::from_f32(1.0);
        // 2048 + 1 is not representable in f16 (11-bit significand): rounds to even.
        assert_eq!(f16::combine(a, one, ReduceOp::Sum), a);
        assert_eq!(bf16::combine(bf16::from_f32(3.0), bf16::from_f32(0.5), ReduceOp::Prod), bf16::from_f32(1.5));
        assert_eq!(f16::div_n(f16::from_f32(10.0), 4), f16::from_f32(2.5));
    }
}
