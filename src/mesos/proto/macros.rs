//! The declaration macros: `message!` and `enumeration!` generate the structs, enums and
//! their protobuf and Mesos JSON codecs.

/// Declares a protobuf message: a struct with serde (Mesos JSON) and
/// [`Message`](crate::mesos::proto::Message) impls.
///
/// ```ignore
/// message! {
///     /// doc
///     Offer = "mesos.Offer" {
///         req 1 id: OfferID,
///         opt 8 url: Url,        // Option<Url>
///         rep 5 resources: Resource, // Vec<Resource>
///     }
/// }
/// ```
#[macro_export]
macro_rules! message {
    (
        $(#[$meta:meta])*
        $name:ident = $full:literal {
            $( $label:ident $number:literal $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $crate::message_struct!(@munch [$(#[$meta])* $name] [] $( $label $field : $ty ; )*);

        impl $crate::mesos::proto::Message for $name {
            const NAME: &'static str = $full;

            #[inline]
            fn merge_field(
                &mut self,
                number: u32,
                wire: u8,
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
                seen: &mut u64,
            ) -> ::std::result::Result<bool, $crate::mesos::proto::DecodeError> {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = (&r, &depth, &wire);
                match number {
                    $( $number => {
                        let known = $label::merge(&mut self.$field, stringify!($field), wire, r, depth)?;
                        if known { *seen |= 1u64 << ($number % 64); }
                        Ok(known)
                    } )*
                    _ => Ok(false),
                }
            }

            fn check_required(seen: u64) -> ::std::result::Result<(), $crate::mesos::proto::DecodeError> {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = seen;
                $(
                    if $label::is_required() && seen & (1u64 << ($number % 64)) == 0 {
                        return Err($crate::mesos::proto::missing(stringify!($field)));
                    }
                )*
                Ok(())
            }

            #[inline]
            fn body_len(&self) -> usize {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                0 $( + $label::len(&self.$field, $number) )*
            }

            #[inline]
            fn write_body(&self, out: &mut Vec<u8>) {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = &out;
                $( $label::write(&self.$field, $number, out); )*
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                d: D,
            ) -> ::std::result::Result<Self, D::Error> {
                struct V;
                impl<'de> ::serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", $full, " object"))
                    }
                    fn visit_map<A: ::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> ::std::result::Result<$name, A::Error> {
                        #[allow(unused_imports)]
                        use $crate::mesos::proto::{req, opt, rep};
                        use $crate::mesos::proto::json::{self, FieldDesc};
                        const FIELDS: &[FieldDesc] = &[$( FieldDesc {
                            name: json::name(stringify!($field)),
                            number: $number,
                            required: $label::is_required(),
                        } ),*];
                        const _: () = assert!(json::distinct_bits(FIELDS), "field numbers share a bit");
                        let lookup = |s: &str| -> Option<u32> {
                            $( {
                                const NAME: &str = json::name(stringify!($field));
                                if s == NAME {
                                    return Some($number);
                                }
                            } )*
                            None
                        };
                        let mut m = <$name as ::std::default::Default>::default();
                        json::read_object(FIELDS, lookup, &mut map, |number, map| match number {
                            $( $number => $label::from_json(&mut m.$field, map), )*
                            _ => unreachable!("a number from FIELDS"),
                        })?;
                        Ok(m)
                    }
                }
                d.deserialize_map(V)
            }
        }

        impl $crate::mesos::proto::Field for $name {
            const WIRE: u8 = $crate::mesos::proto::WIRE_LEN;
            #[inline]
            fn read(
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<Self, $crate::mesos::proto::DecodeError> {
                let mut m = Self::default();
                $crate::mesos::proto::read_nested(&mut m, r, depth)?;
                Ok(m)
            }
            #[inline]
            fn merge(
                &mut self,
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<(), $crate::mesos::proto::DecodeError> {
                $crate::mesos::proto::read_nested(self, r, depth)
            }
            #[inline]
            fn value_len(&self) -> usize {
                let n = <Self as $crate::mesos::proto::Message>::body_len(self);
                $crate::mesos::proto::varint_len(n as u64) + n
            }
            #[inline]
            fn write_value(&self, out: &mut Vec<u8>) {
                let n = <Self as $crate::mesos::proto::Message>::body_len(self);
                $crate::mesos::proto::put_varint(out, n as u64);
                <Self as $crate::mesos::proto::Message>::write_body(self, out);
            }
        }
    };
}

/// Builds the struct of a [`message!`]: `req` fields are plain, `opt` fields are `Option`,
/// `rep` fields are `Vec`; absent ones are left out of the JSON. (Reading JSON is
/// [`message!`]'s own `Deserialize`, so that `null` means absent for every field.)
#[doc(hidden)]
#[macro_export]
macro_rules! message_struct {
    (@munch [$(#[$meta:meta])* $name:ident] [$($out:tt)*]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, ::serde::Serialize)]
        pub struct $name { $($out)* }
    };
    (@munch $hdr:tt [$($out:tt)*] req $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)* pub $field: $ty,] $($rest)*);
    };
    (@munch $hdr:tt [$($out:tt)*] opt $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)*
            #[serde(skip_serializing_if = "Option::is_none")]
            pub $field: Option<$ty>,] $($rest)*);
    };
    (@munch $hdr:tt [$($out:tt)*] rep $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)*
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub $field: Vec<$ty>,] $($rest)*);
    };
}

/// Declares a proto2 enum. The first variant is the default, as in proto2. Values this build
/// does not know decode to `Other(n)` (protobuf) or `Other(-1)` (a JSON name), so that a
/// newer master's additions never break the stream; the caller decides what to do with them.
#[macro_export]
macro_rules! enumeration {
    (
        $(#[$meta:meta])*
        $name:ident { $( $variant:ident = $value:literal $json:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $variant, )+
            /// A value this build does not know.
            Other(i32),
        }

        impl Default for $name {
            fn default() -> Self {
                $crate::enumeration!(@first $($variant)+)
            }
        }

        impl $name {
            pub fn from_i32(v: i32) -> Self {
                match v {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other),
                }
            }
            pub fn as_i32(self) -> i32 {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(v) => v,
                }
            }
            /// The name Mesos uses for this value (in JSON and its docs).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $json, )+
                    $name::Other(_) => "<unknown>",
                }
            }
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $( $json => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $name::Other(v) => write!(f, "UNKNOWN({v})"),
                    other => f.write_str(other.as_str()),
                }
            }
        }

        impl $crate::mesos::proto::Field for $name {
            const WIRE: u8 = $crate::mesos::proto::WIRE_VARINT;
            #[inline]
            fn read(
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<Self, $crate::mesos::proto::DecodeError> {
                <i32 as $crate::mesos::proto::Field>::read(r, depth).map($name::from_i32)
            }
            #[inline]
            fn value_len(&self) -> usize {
                $crate::mesos::proto::Field::value_len(&self.as_i32())
            }
            #[inline]
            fn write_value(&self, out: &mut Vec<u8>) {
                $crate::mesos::proto::Field::write_value(&self.as_i32(), out)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                match self {
                    $name::Other(v) => s.serialize_i32(*v),
                    other => s.serialize_str(other.as_str()),
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                struct V;
                impl ::serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " name"))
                    }
                    fn visit_str<E: ::serde::de::Error>(self, s: &str) -> ::std::result::Result<$name, E> {
                        Ok($name::from_name(s).unwrap_or($name::Other(-1)))
                    }
                    fn visit_i64<E: ::serde::de::Error>(self, v: i64) -> ::std::result::Result<$name, E> {
                        i32::try_from(v).map($name::from_i32).map_err(|_| E::custom("enum value out of range"))
                    }
                    fn visit_u64<E: ::serde::de::Error>(self, v: u64) -> ::std::result::Result<$name, E> {
                        i32::try_from(v).map($name::from_i32).map_err(|_| E::custom("enum value out of range"))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
    (@first $first:ident $($rest:ident)*) => { Self::$first };
}
