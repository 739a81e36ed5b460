//! Layout metadata for every `#[repr(C)]` ABI struct and constant, so that one test can
//! compare them all with the installed uapi headers through a generated C program.
//!
//! Structs are declared with `abi_struct!` and constants with `abi_consts!`; both
//! macros emit the Rust item and a record of what the C side must agree with.

/// One struct's size and field offsets, with the C names to check them against.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// C type, e.g. `struct ib_uverbs_query_port_resp`.
    pub c_name: &'static str,
    /// Rust type name, for messages.
    pub rust_name: &'static str,
    pub size: usize,
    /// (C member path, offset, size) for each field.
    pub fields: &'static [(&'static str, usize, usize)],
}

/// A constant and the C expression that must evaluate to the same value.
#[derive(Debug, Clone, Copy)]
pub struct Const {
    pub c_expr: &'static str,
    pub value: u64,
}

/// Implemented by every struct declared with `abi_struct!`.
pub trait CLayout {
    const LAYOUT: Layout;
}

/// Declares a `#[repr(C)]` ABI struct with zerocopy derives and its [`CLayout`] record.
///
/// A field may name the C member path it mirrors when that differs from the Rust name
/// (nested C structs and unions are flattened on the Rust side): `field: u8 => "a.b"`.
#[macro_export]
macro_rules! abi_struct {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident = $cname:literal {
            $( $(#[$fm:meta])* $field:ident : $ty:ty $(=> $cpath:literal)? ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq,
                 zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout)]
        $vis struct $name { $( $(#[$fm])* pub $field: $ty ),* }

        impl $crate::sys::layout::CLayout for $name {
            const LAYOUT: $crate::sys::layout::Layout = $crate::sys::layout::Layout {
                c_name: $cname,
                rust_name: stringify!($name),
                size: ::core::mem::size_of::<$name>(),
                fields: &[ $( (
                    $crate::abi_struct!(@path $field $(, $cpath)?),
                    ::core::mem::offset_of!($name, $field),
                    ::core::mem::size_of::<$ty>(),
                ) ),* ],
            };
        }
    };
    (@path $field:ident) => { stringify!($field) };
    (@path $field:ident, $cpath:literal) => { $cpath };
}

/// Declares constants together with the C expression each must equal, and a function
/// `$list()` returning those records for the header comparison test.
#[macro_export]
macro_rules! abi_consts {
    (
        fn $list:ident;
        $( $(#[$m:meta])* pub const $name:ident : $ty:ty = $val:expr => $cexpr:literal; )*
    ) => {
        $( $(#[$m])* pub const $name: $ty = $val; )*

        /// Every constant above with the C expression it must match.
        pub fn $list() -> ::std::vec::Vec<$crate::sys::layout::Const> {
            ::std::vec![ $( $crate::sys::layout::Const { c_expr: $cexpr, value: $name as u64 } ),* ]
        }
    };
}
