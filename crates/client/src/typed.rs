//! Typed helpers: one handle per CRDT type that builds its operations, and [`ValueExt`] to read values back.
//!
//! A handle names either a top-level object (`K = ObjectId`, built from a key and a bucket) or a field of a map
//! (`K = MapKey`, built from a field key). Its operations return `(K, Op)` pairs, ready for
//! [`Transaction::update`](crate::Transaction::update) and [`Client::static_update`](crate::Client::static_update)
//! at the top level, or for [`Map::update`] inside a map:
//!
//! ```
//! use causet_client::{Counter, Map, Set};
//! let page = Map::rr("page:1", "site");
//! let update = page.update([Counter::fat_field("views").increment(1), Set::aw_field("tags").add("rust")]);
//! let hits = Counter::new("hits", "site").increment(5);
//! # let _ = (update, hits);
//! ```

use causet_core::ObjectId;
use causet_crdt::{CrdtType, MapKey, Op, Value};

fn object(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>, ty: CrdtType) -> ObjectId {
    ObjectId::new(key, bucket, ty)
}

fn field(key: impl Into<Vec<u8>>, ty: CrdtType) -> MapKey {
    MapKey { key: key.into(), ty }
}

fn elements<E: Into<Vec<u8>>>(elements: impl IntoIterator<Item = E>) -> Vec<Vec<u8>> {
    elements.into_iter().map(Into::into).collect()
}

/// A counter: `counter_pn`, `counter_fat` (with reset) or `counter_b` (bounded, non-negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter<K = ObjectId> {
    key: K,
}

impl Counter<ObjectId> {
    /// A `counter_pn` object.
    pub fn new(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Counter { key: object(key, bucket, CrdtType::CounterPn) }
    }

    /// A `counter_fat` object (supports reset).
    pub fn fat(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Counter { key: object(key, bucket, CrdtType::CounterFat) }
    }

    /// A `counter_b` object: a decrement fails without the local DC's rights.
    pub fn bounded(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Counter { key: object(key, bucket, CrdtType::CounterB) }
    }
}

impl Counter<MapKey> {
    /// A `counter_pn` field of a map (`map_go` only: a `map_rr` needs fields with reset).
    pub fn field(key: impl Into<Vec<u8>>) -> Self {
        Counter { key: field(key, CrdtType::CounterPn) }
    }

    /// A `counter_fat` field of a map.
    pub fn fat_field(key: impl Into<Vec<u8>>) -> Self {
        Counter { key: field(key, CrdtType::CounterFat) }
    }
}

impl<K: Clone> Counter<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Adds `n` (negative to subtract).
    pub fn increment(&self, n: i64) -> (K, Op) {
        (self.key.clone(), Op::Increment(n))
    }

    /// Subtracts `n` (`i64::MIN` saturates to `i64::MAX`).
    pub fn decrement(&self, n: i64) -> (K, Op) {
        (self.key.clone(), Op::Increment(n.saturating_neg()))
    }

    /// Resets to zero (`counter_fat` only).
    pub fn reset(&self) -> (K, Op) {
        (self.key.clone(), Op::Reset)
    }
}

/// A set: `set_aw` (add-wins) or `set_rw` (remove-wins).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set<K = ObjectId> {
    key: K,
}

impl Set<ObjectId> {
    /// A `set_aw` object.
    pub fn aw(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Set { key: object(key, bucket, CrdtType::SetAw) }
    }

    /// A `set_rw` object.
    pub fn rw(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Set { key: object(key, bucket, CrdtType::SetRw) }
    }
}

impl Set<MapKey> {
    /// A `set_aw` field of a map.
    pub fn aw_field(key: impl Into<Vec<u8>>) -> Self {
        Set { key: field(key, CrdtType::SetAw) }
    }

    /// A `set_rw` field of a map.
    pub fn rw_field(key: impl Into<Vec<u8>>) -> Self {
        Set { key: field(key, CrdtType::SetRw) }
    }
}

impl<K: Clone> Set<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Adds an element.
    pub fn add(&self, element: impl Into<Vec<u8>>) -> (K, Op) {
        (self.key.clone(), Op::Add(vec![element.into()]))
    }

    /// Adds elements.
    pub fn add_all<E: Into<Vec<u8>>>(&self, elements_added: impl IntoIterator<Item = E>) -> (K, Op) {
        (self.key.clone(), Op::Add(elements(elements_added)))
    }

    /// Removes an element.
    pub fn remove(&self, element: impl Into<Vec<u8>>) -> (K, Op) {
        (self.key.clone(), Op::Remove(vec![element.into()]))
    }

    /// Removes elements.
    pub fn remove_all<E: Into<Vec<u8>>>(&self, elements_removed: impl IntoIterator<Item = E>) -> (K, Op) {
        (self.key.clone(), Op::Remove(elements(elements_removed)))
    }

    /// Removes every element.
    pub fn reset(&self) -> (K, Op) {
        (self.key.clone(), Op::Reset)
    }
}

/// A last-writer-wins register (`register_lww`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LwwRegister<K = ObjectId> {
    key: K,
}

impl LwwRegister<ObjectId> {
    /// A `register_lww` object.
    pub fn new(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        LwwRegister { key: object(key, bucket, CrdtType::RegisterLww) }
    }
}

impl LwwRegister<MapKey> {
    /// A `register_lww` field of a map (in a `map_rr`, removing it leaves it: it has no reset).
    pub fn field(key: impl Into<Vec<u8>>) -> Self {
        LwwRegister { key: field(key, CrdtType::RegisterLww) }
    }
}

impl<K: Clone> LwwRegister<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Assigns a value.
    pub fn assign(&self, value: impl Into<Vec<u8>>) -> (K, Op) {
        (self.key.clone(), Op::Assign(value.into()))
    }
}

/// A multi-value register (`register_mv`): concurrent assignments are all kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MvRegister<K = ObjectId> {
    key: K,
}

impl MvRegister<ObjectId> {
    /// A `register_mv` object.
    pub fn new(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        MvRegister { key: object(key, bucket, CrdtType::RegisterMv) }
    }
}

impl MvRegister<MapKey> {
    /// A `register_mv` field of a map.
    pub fn field(key: impl Into<Vec<u8>>) -> Self {
        MvRegister { key: field(key, CrdtType::RegisterMv) }
    }
}

impl<K: Clone> MvRegister<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Assigns a value, replacing every value this transaction's snapshot holds.
    pub fn assign(&self, value: impl Into<Vec<u8>>) -> (K, Op) {
        (self.key.clone(), Op::Assign(value.into()))
    }

    /// Clears the register.
    pub fn reset(&self) -> (K, Op) {
        (self.key.clone(), Op::Reset)
    }
}

/// A flag: `flag_ew` (enable-wins) or `flag_dw` (disable-wins).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag<K = ObjectId> {
    key: K,
}

impl Flag<ObjectId> {
    /// A `flag_ew` object.
    pub fn ew(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Flag { key: object(key, bucket, CrdtType::FlagEw) }
    }

    /// A `flag_dw` object.
    pub fn dw(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Flag { key: object(key, bucket, CrdtType::FlagDw) }
    }
}

impl Flag<MapKey> {
    /// A `flag_ew` field of a map.
    pub fn ew_field(key: impl Into<Vec<u8>>) -> Self {
        Flag { key: field(key, CrdtType::FlagEw) }
    }

    /// A `flag_dw` field of a map.
    pub fn dw_field(key: impl Into<Vec<u8>>) -> Self {
        Flag { key: field(key, CrdtType::FlagDw) }
    }
}

impl<K: Clone> Flag<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Enables the flag.
    pub fn enable(&self) -> (K, Op) {
        (self.key.clone(), Op::Enable)
    }

    /// Disables the flag.
    pub fn disable(&self) -> (K, Op) {
        (self.key.clone(), Op::Disable)
    }

    /// Resets the flag to disabled.
    pub fn reset(&self) -> (K, Op) {
        (self.key.clone(), Op::Reset)
    }
}

/// A map of nested objects: `map_go` (grow-only) or `map_rr` (recursive reset: removing a key resets its value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Map<K = ObjectId> {
    key: K,
}

impl Map<ObjectId> {
    /// A `map_go` object.
    pub fn go(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Map { key: object(key, bucket, CrdtType::MapGo) }
    }

    /// A `map_rr` object.
    pub fn rr(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>) -> Self {
        Map { key: object(key, bucket, CrdtType::MapRr) }
    }
}

impl Map<MapKey> {
    /// A `map_go` field of a map (in a `map_rr`, removing it leaves it: it has no reset).
    pub fn go_field(key: impl Into<Vec<u8>>) -> Self {
        Map { key: field(key, CrdtType::MapGo) }
    }

    /// A `map_rr` field of a map.
    pub fn rr_field(key: impl Into<Vec<u8>>) -> Self {
        Map { key: field(key, CrdtType::MapRr) }
    }
}

impl<K: Clone> Map<K> {
    /// The object or field.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Applies operations to fields, built with the field handles (`Counter::fat_field("n").increment(1)`). Each
    /// field may appear once.
    pub fn update(&self, fields: impl IntoIterator<Item = (MapKey, Op)>) -> (K, Op) {
        (self.key.clone(), Op::MapUpdate(fields.into_iter().collect()))
    }

    /// Removes fields, resetting their values (`map_rr` only).
    pub fn remove(&self, fields: impl IntoIterator<Item = MapKey>) -> (K, Op) {
        (self.key.clone(), Op::MapRemove(fields.into_iter().collect()))
    }

    /// Removes every field (`map_rr` only).
    pub fn reset(&self) -> (K, Op) {
        (self.key.clone(), Op::Reset)
    }
}

/// Typed access to a read [`Value`]: each method returns `None` when the value has another shape.
pub trait ValueExt {
    /// A counter's value.
    fn as_counter(&self) -> Option<i64>;
    /// A set's elements, in ascending byte order.
    fn as_set(&self) -> Option<&[Vec<u8>]>;
    /// A last-writer-wins register's value (empty when never assigned).
    fn as_register(&self) -> Option<&[u8]>;
    /// A multi-value register's values.
    fn as_mv_register(&self) -> Option<&[Vec<u8>]>;
    /// A flag's value.
    fn as_flag(&self) -> Option<bool>;
    /// A map's entries, in ascending key order.
    fn as_map(&self) -> Option<&[(MapKey, Value)]>;
    /// A map's field, if the map has it.
    fn field(&self, key: &MapKey) -> Option<&Value>;
}

impl ValueExt for Value {
    fn as_counter(&self) -> Option<i64> {
        match self {
            Value::Counter(n) => Some(*n),
            _ => None,
        }
    }

    fn as_set(&self) -> Option<&[Vec<u8>]> {
        match self {
            Value::Set(elements) => Some(elements),
            _ => None,
        }
    }

    fn as_register(&self) -> Option<&[u8]> {
        match self {
            Value::Register(value) => Some(value),
            _ => None,
        }
    }

    fn as_mv_register(&self) -> Option<&[Vec<u8>]> {
        match self {
            Value::MvRegister(values) => Some(values),
            _ => None,
        }
    }

    fn as_flag(&self) -> Option<bool> {
        match self {
            Value::Flag(b) => Some(*b),
            _ => None,
        }
    }

    fn as_map(&self) -> Option<&[(MapKey, Value)]> {
        match self {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    fn field(&self, key: &MapKey) -> Option<&Value> {
        self.as_map()?.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_name_the_right_types() {
        assert_eq!(Counter::new("k", "b").key().ty, CrdtType::CounterPn);
        assert_eq!(Counter::fat("k", "b").key().ty, CrdtType::CounterFat);
        assert_eq!(Counter::bounded("k", "b").key().ty, CrdtType::CounterB);
        assert_eq!(Set::aw("k", "b").key().ty, CrdtType::SetAw);
        assert_eq!(Set::rw("k", "b").key().ty, CrdtType::SetRw);
        assert_eq!(LwwRegister::new("k", "b").key().ty, CrdtType::RegisterLww);
        assert_eq!(MvRegister::new("k", "b").key().ty, CrdtType::RegisterMv);
        assert_eq!(Flag::ew("k", "b").key().ty, CrdtType::FlagEw);
        assert_eq!(Flag::dw("k", "b").key().ty, CrdtType::FlagDw);
        assert_eq!(Map::go("k", "b").key().ty, CrdtType::MapGo);
        assert_eq!(Map::rr("k", "b").key().ty, CrdtType::MapRr);
        assert_eq!(Counter::field("f").key().ty, CrdtType::CounterPn);
        assert_eq!(Counter::fat_field("f").key().ty, CrdtType::CounterFat);
        assert_eq!(Set::aw_field("f").key().ty, CrdtType::SetAw);
        assert_eq!(Set::rw_field("f").key().ty, CrdtType::SetRw);
        assert_eq!(LwwRegister::field("f").key().ty, CrdtType::RegisterLww);
        assert_eq!(MvRegister::field("f").key().ty, CrdtType::RegisterMv);
        assert_eq!(Flag::ew_field("f").key().ty, CrdtType::FlagEw);
        assert_eq!(Flag::dw_field("f").key().ty, CrdtType::FlagDw);
        assert_eq!(Map::go_field("f").key().ty, CrdtType::MapGo);
        assert_eq!(Map::rr_field("f").key().ty, CrdtType::MapRr);
        let o = Counter::new("key", "bucket");
        assert_eq!((o.key().key.as_slice(), o.key().bucket.as_slice()), (&b"key"[..], &b"bucket"[..]));
    }

    #[test]
    fn handles_build_the_protocol_operations() {
        let c = Counter::new("c", "b");
        assert_eq!(c.increment(3).1, Op::Increment(3));
        assert_eq!(c.decrement(3).1, Op::Increment(-3));
        assert_eq!(c.decrement(i64::MIN).1, Op::Increment(i64::MAX));
        assert_eq!(Counter::fat("c", "b").reset().1, Op::Reset);
        let s = Set::aw("s", "b");
        assert_eq!(s.add("x").1, Op::Add(vec![b"x".to_vec()]));
        assert_eq!(s.add_all(["x", "y"]).1, Op::Add(vec![b"x".to_vec(), b"y".to_vec()]));
        assert_eq!(s.remove(vec![1u8]).1, Op::Remove(vec![vec![1]]));
        assert_eq!(s.remove_all(Vec::<Vec<u8>>::new()).1, Op::Remove(vec![]));
        assert_eq!(s.reset().1, Op::Reset);
        assert_eq!(LwwRegister::new("r", "b").assign("v").1, Op::Assign(b"v".to_vec()));
        assert_eq!(MvRegister::new("r", "b").assign("v").1, Op::Assign(b"v".to_vec()));
        assert_eq!(MvRegister::new("r", "b").reset().1, Op::Reset);
        let f = Flag::dw("f", "b");
        assert_eq!((f.enable().1, f.disable().1, f.reset().1), (Op::Enable, Op::Disable, Op::Reset));
        let m = Map::rr("m", "b");
        let (object, op) = m.update([Counter::fat_field("n").increment(1), Flag::ew_field("f").enable()]);
        assert_eq!(object, ObjectId::new("m", "b", CrdtType::MapRr));
        assert_eq!(
            op,
            Op::MapUpdate(vec![
                (MapKey { key: b"n".to_vec(), ty: CrdtType::CounterFat }, Op::Increment(1)),
                (MapKey { key: b"f".to_vec(), ty: CrdtType::FlagEw }, Op::Enable),
            ])
        );
        let nested = Map::rr_field("inner").update([Set::rw_field("s").add("e")]);
        assert_eq!(nested.0, MapKey { key: b"inner".to_vec(), ty: CrdtType::MapRr });
        assert_eq!(
            m.remove([Counter::fat_field("n").key().clone()]).1,
            Op::MapRemove(vec![MapKey { key: b"n".to_vec(), ty: CrdtType::CounterFat }])
        );
        assert_eq!(m.reset().1, Op::Reset);
    }

    #[test]
    fn values_are_read_by_shape() {
        let key = MapKey { key: b"n".to_vec(), ty: CrdtType::CounterFat };
        let map = Value::Map(vec![(key.clone(), Value::Counter(4))]);
        assert_eq!(map.field(&key).and_then(ValueExt::as_counter), Some(4));
        assert_eq!(map.field(&MapKey { key: b"x".to_vec(), ty: CrdtType::CounterFat }), None);
        assert_eq!(Value::Counter(1).as_set(), None);
        assert_eq!(Value::Flag(true).as_flag(), Some(true));
        assert_eq!(Value::Register(b"r".to_vec()).as_register(), Some(&b"r"[..]));
        assert_eq!(Value::MvRegister(vec![]).as_mv_register(), Some(&[][..]));
        assert_eq!(Value::Set(vec![b"e".to_vec()]).as_set().map(<[_]>::len), Some(1));
        assert_eq!(Value::Counter(1).field(&key), None);
    }
}
