//! HoneyPot's write buffer at a caching coordinator (docs/design/honeypot.md §3): the effects of update
//! transactions acknowledged at this node but not yet committed at their owners, grouped into *components* that
//! are handed over to the owners each in one commit.
//!
//! - **Components.** The objects a transaction writes, and the buffered objects it read, join one component
//!   (merging the components they were in): what one transaction saw and wrote must reach the owners in one
//!   atomic commit. A component's lease starts with its first write; merged components keep the earliest end, so
//!   no buffered write waits longer than a lease. Every id merged into a component stays answerable
//!   ([`WriteBuffer::resolve`]), so a clock token naming any of them finds the component until its handover.
//! - **Cap.** A transaction that would grow a component past [`BufferConfig::max_component_objects`] is refused
//!   ([`WriteBuffer::admit`]) and the coordinator hands the components over (`coordinator::handover`: at once, and
//!   then it buffers the transaction; while a round is under way it lets components grow to a multiple of the cap,
//!   [`WriteBuffer::admit_up_to`]); one transaction alone may exceed the cap (its writes are atomic whatever their
//!   number).
//! - **Order inside the one commit.** A handover applies every effect of a component at one commit stamp, so
//!   effects of successive transactions must not tie where a type orders effects by their sequence number inside
//!   a transaction (last-writer-wins registers, also nested in maps). Transactions therefore draw their sequence
//!   numbers from the buffer ([`TxView::seq`]): a transaction that started after another was buffered numbers
//!   its effects after all of that one's. Concurrent transactions may tie; they apply in buffer order at the cache
//!   and at every replica alike, so all agree.
//! - **Positions.** Each buffered transaction gets the next position. A transaction reads the buffered effects
//!   added before it started ([`TxView::position`]) and no later ones: reading a write buffered after its start on
//!   one object but not on another would break atomicity.
//! - **Folding.** An effect folds into the object's previous one when the CRDT allows it ([`Effect::absorb`]:
//!   counter increments, never across a reset; last-writer-wins assigns) and no other open transaction started
//!   between the two (it must still read the earlier one without the later).
//!
//! Invariants (checked by [`WriteBuffer::check`] in tests and debug builds): every buffered object belongs to
//! exactly one live component, which lists it; every merged id resolves to a live component; positions of one
//! object's effects never descend.

use crate::{DetHashMap, ObjectId, VectorClock};
use causet_crdt::Effect;
use std::collections::{BTreeMap, BTreeSet};

/// A component's id: the id it was created with, or any id merged into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct ComponentId(pub u64);

/// The write buffer's settings.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BufferConfig {
    /// How long a component's buffered writes may wait for their handover, µs (the cache's lease).
    pub lease_us: u64,
    /// Most objects in one component: a transaction that would grow one past it hands it over first.
    pub max_component_objects: usize,
}

impl Default for BufferConfig {
    fn default() -> Self {
        Self { lease_us: 1_000_000, max_component_objects: 64 }
    }
}

/// What a transaction records when it starts at a caching coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxView {
    /// It reads the buffered effects added before this position.
    pub position: u64,
    /// Its effects are numbered from here on (`EffectCtx::next_seq`).
    pub seq: u32,
}

/// One buffered effect of an object, with the position of the transaction that buffered it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Buffered {
    /// The position of the (last) transaction whose effect this is.
    pub position: u64,
    /// The effect (folded with those of later transactions where allowed).
    pub effect: Effect,
}

/// Objects whose buffered effects must reach their owners in one commit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Component {
    /// Every id merged into it, its own first: tokens naming any of them stay answerable until the handover.
    pub ids: Vec<ComponentId>,
    /// Each object's buffered effects, in the order they apply.
    pub objects: BTreeMap<ObjectId, Vec<Buffered>>,
    /// The join of its transactions' dependency vectors: the handover commits with it as its snapshot.
    pub deps: VectorClock,
    /// When its lease ends (one lease after its earliest write): it is handed over then.
    pub due_us: u64,
    /// Transactions buffered in it.
    pub transactions: u64,
    /// The encoded size of its effects.
    pub bytes: usize,
}

impl Component {
    /// The effects of `id` a transaction started at `position` reads, in order (those added before it started).
    pub fn effects<'a>(&'a self, id: &ObjectId, position: u64) -> impl Iterator<Item = &'a Effect> + use<'a> {
        let list = self.objects.get(id);
        list.into_iter().flatten().take_while(move |b| b.position < position).map(|b| &b.effect)
    }

    /// Takes `other`'s objects (none of them in this one), ids and transactions in.
    pub fn absorb(&mut self, other: Component) {
        self.ids.extend(other.ids);
        self.objects.extend(other.objects);
        self.deps.merge_max(&other.deps);
        self.due_us = self.due_us.min(other.due_us);
        self.transactions += other.transactions;
        self.bytes += other.bytes;
    }
}

/// A transaction to buffer ([`WriteBuffer::add`]).
#[derive(Clone, Debug)]
pub struct BufferedTx {
    /// Its effects, in the order it generated them.
    pub writes: Vec<(ObjectId, Effect)>,
    /// The buffered objects it read (their components join its own).
    pub read: Vec<ObjectId>,
    /// Its dependency vector (its window's least snapshot).
    pub deps: VectorClock,
    /// The sequence number after its last effect's.
    pub seq_end: u32,
    /// The latest start position of the other transactions still open: no effect folds across it.
    pub newest_open: Option<u64>,
}

/// Counters of the buffer's work.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BufferStats {
    /// Transactions buffered.
    pub transactions: u64,
    /// Effects buffered, and of them folded into an earlier one.
    pub effects: u64,
    /// Effects folded into the object's previous one.
    pub folded: u64,
    /// Components merged into another.
    pub merges: u64,
    /// Components now, objects in them and the encoded bytes of their effects.
    pub components: usize,
    /// Buffered objects now.
    pub objects: usize,
    /// Bytes of buffered effects now.
    pub bytes: usize,
}

/// The write buffer of one coordinator.
#[derive(Debug, Default)]
pub struct WriteBuffer {
    config: BufferConfig,
    next_id: u64,
    next_position: u64,
    next_seq: u32,
    components: BTreeMap<ComponentId, Component>,
    of_object: DetHashMap<ObjectId, ComponentId>,
    /// Every id of a live component, to the component's current key in `components`.
    alias: DetHashMap<ComponentId, ComponentId>,
    /// The join of every live component's dependencies: a caching transaction's window starts at or above it.
    deps: Option<VectorClock>,
    bytes: usize,
    stats: BufferStats,
}

impl WriteBuffer {
    /// An empty buffer.
    pub fn new(config: BufferConfig) -> Self {
        Self { config, ..Self::default() }
    }

    /// What a transaction starting now records.
    pub fn start(&self) -> TxView {
        TxView { position: self.next_position, seq: self.next_seq }
    }

    /// The join of every pending component's dependency vector (`None`: nothing is buffered). A transaction that
    /// may read buffered effects starts its window at or above it, so that it sees what they depend on.
    pub fn deps(&self) -> Option<&VectorClock> {
        self.deps.as_ref()
    }

    /// The effects of `id` a transaction started at `position` reads, in order (none if nothing is buffered).
    pub fn effects(&self, id: &ObjectId, position: u64) -> impl Iterator<Item = &Effect> {
        let component = self.of_object.get(id).and_then(|c| self.components.get(c));
        component.map(|c| c.effects(id, position)).into_iter().flatten()
    }

    /// Whether `id` has buffered effects.
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.of_object.contains_key(id)
    }

    /// The live component an id (its own, or one merged into it) names, if it was not handed over yet.
    pub fn resolve(&self, id: ComponentId) -> Option<ComponentId> {
        self.alias.get(&id).copied()
    }

    /// The component holding `object`, if any.
    pub fn component_of(&self, object: &ObjectId) -> Option<ComponentId> {
        self.of_object.get(object).copied()
    }

    /// A pending component.
    pub fn component(&self, id: ComponentId) -> Option<&Component> {
        self.resolve(id).and_then(|id| self.components.get(&id))
    }

    /// Whether a transaction touching `objects` (its writes, and the objects it read that are buffered) may be buffered
    /// without growing a component past the cap; if not, the components to hand over first.
    pub fn admit<'a>(&self, objects: impl IntoIterator<Item = &'a ObjectId>) -> Result<(), Vec<ComponentId>> {
        self.admit_up_to(objects, self.config.max_component_objects)
    }

    /// [`WriteBuffer::admit`] with a cap of `cap` objects instead of the configured one.
    pub fn admit_up_to<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a ObjectId>,
        cap: usize,
    ) -> Result<(), Vec<ComponentId>> {
        let objects: BTreeSet<&ObjectId> = objects.into_iter().collect();
        let touched: BTreeSet<ComponentId> = objects.iter().filter_map(|o| self.component_of(o)).collect();
        let fresh = objects.iter().filter(|o| !self.holds(o)).count();
        let size = fresh + touched.iter().map(|c| self.components[c].objects.len()).sum::<usize>();
        if size > cap && !touched.is_empty() {
            return Err(touched.into_iter().collect());
        }
        Ok(())
    }

    /// Buffers a transaction at `now_us`: its objects join one component (merging those they were in), its
    /// effects are appended (folded where allowed). Returns the component. Call [`WriteBuffer::admit`] first.
    pub fn add(&mut self, now_us: u64, tx: BufferedTx) -> ComponentId {
        let position = self.next_position;
        self.next_position += 1;
        self.next_seq = self.next_seq.max(tx.seq_end);
        let objects: BTreeSet<&ObjectId> = tx.writes.iter().map(|(o, _)| o).chain(tx.read.iter()).collect();
        let touched: BTreeSet<ComponentId> = objects.iter().filter_map(|o| self.component_of(o)).collect();
        // The largest touched component absorbs the others (their objects are relabelled: smaller into larger).
        let into = match touched.iter().max_by_key(|c| (self.components[c].objects.len(), std::cmp::Reverse(**c))) {
            Some(&c) => c,
            None => {
                let id = ComponentId(self.next_id);
                self.next_id += 1;
                let due_us = now_us.saturating_add(self.config.lease_us);
                let component = Component {
                    ids: vec![id],
                    objects: BTreeMap::new(),
                    deps: tx.deps.clone(),
                    due_us,
                    transactions: 0,
                    bytes: 0,
                };
                self.components.insert(id, component);
                self.alias.insert(id, id);
                id
            }
        };
        for other in touched.into_iter().filter(|c| *c != into) {
            let absorbed = self.components.remove(&other).expect("a touched component is live");
            for id in &absorbed.ids {
                self.alias.insert(*id, into);
            }
            for object in absorbed.objects.keys() {
                self.of_object.insert(object.clone(), into);
            }
            self.components.get_mut(&into).expect("live").absorb(absorbed);
            self.stats.merges += 1;
        }
        let component = self.components.get_mut(&into).expect("live");
        component.deps.merge_max(&tx.deps);
        component.transactions += 1;
        for (object, effect) in tx.writes {
            let list = component.objects.entry(object.clone()).or_default();
            self.of_object.insert(object, into);
            self.stats.effects += 1;
            // No other open transaction started after the previous effect: none can read it without this one.
            let foldable = |last: &Buffered| tx.newest_open.is_none_or(|open| open <= last.position);
            if let Some(last) = list.last_mut().filter(|last| foldable(last)) {
                let before = last.effect.encode().len();
                if last.effect.absorb(&effect) {
                    last.position = position;
                    let after = last.effect.encode().len();
                    component.bytes = component.bytes + after - before;
                    self.bytes = self.bytes + after - before;
                    self.stats.folded += 1;
                    continue;
                }
            }
            let bytes = effect.encode().len();
            component.bytes += bytes;
            self.bytes += bytes;
            list.push(Buffered { position, effect });
        }
        self.deps = join(self.deps.take(), &tx.deps);
        self.stats.transactions += 1;
        #[cfg(debug_assertions)]
        self.check();
        into
    }

    /// The components whose lease ended by `now_us`, earliest first.
    pub fn due(&self, now_us: u64) -> Vec<ComponentId> {
        let mut due: Vec<(u64, ComponentId)> =
            self.components.iter().filter(|(_, c)| c.due_us <= now_us).map(|(id, c)| (c.due_us, *id)).collect();
        due.sort_unstable();
        due.into_iter().map(|(_, id)| id).collect()
    }

    /// The earliest end of a lease, if anything is buffered (the coordinator's next deadline).
    pub fn next_due(&self) -> Option<u64> {
        self.components.values().map(|c| c.due_us).min()
    }

    /// Takes a component out for its handover: its objects are no longer buffered, its ids no longer resolve.
    /// Sequence numbers go on (see [`WriteBuffer::restart_seq`]).
    pub fn take(&mut self, id: ComponentId) -> Option<Component> {
        let key = self.resolve(id)?;
        let component = self.components.remove(&key).expect("an alias names a live component");
        for id in &component.ids {
            self.alias.remove(id);
        }
        for object in component.objects.keys() {
            self.of_object.remove(object);
        }
        self.bytes -= component.bytes;
        if self.components.is_empty() {
            self.deps = None;
        } else {
            // The join shrinks only by recomputing it: components are few.
            self.deps = self.components.values().fold(None, |deps, c| join(deps, &c.deps));
        }
        #[cfg(debug_assertions)]
        self.check();
        Some(component)
    }

    /// The buffer's settings.
    pub fn config(&self) -> &BufferConfig {
        &self.config
    }

    /// Every pending component, by id (what the coordinator's log keeps of the buffer at the end of a round).
    pub fn components(&self) -> impl Iterator<Item = &Component> {
        self.components.values()
    }

    /// Takes every pending component out (recovery: a round logged as started took them).
    pub fn take_all(&mut self) -> Vec<Component> {
        let ids: Vec<ComponentId> = self.components.keys().copied().collect();
        ids.into_iter().filter_map(|id| self.take(id)).collect()
    }

    /// The sequence number the next transaction's effects start from.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Puts components back as they were logged (recovery), with sequence numbers going on from `seq`. Positions,
    /// ids and numbers handed out later lie above theirs. The components must not share objects with what the
    /// buffer holds.
    pub fn restore(&mut self, components: Vec<Component>, seq: u32) {
        self.next_seq = self.next_seq.max(seq);
        for component in components {
            let key = component.ids[0];
            for id in &component.ids {
                self.next_id = self.next_id.max(id.0 + 1);
                self.alias.insert(*id, key);
            }
            for (object, list) in &component.objects {
                assert!(self.of_object.insert(object.clone(), key).is_none(), "restored components share {object:?}");
                let last = list.iter().map(|b| b.position + 1).max().unwrap_or(0);
                self.next_position = self.next_position.max(last);
            }
            self.bytes += component.bytes;
            self.deps = join(self.deps.take(), &component.deps);
            self.components.insert(key, component);
        }
        #[cfg(debug_assertions)]
        self.check();
    }

    /// Starts sequence numbers from 0 again if nothing is buffered and nothing else holds one: `in_use` says whether
    /// an open transaction holds numbers, or effects taken out are still read as pending (a handover under way,
    /// whose effects a transaction reads above everything, ordered by their numbers). Returns whether it did.
    pub fn restart_seq(&mut self, in_use: bool) -> bool {
        let restart = self.components.is_empty() && !in_use;
        if restart {
            self.next_seq = 0;
        }
        restart
    }

    /// Whether transactions' sequence numbers are running out (past half of their range): the coordinator then
    /// hands everything over and lets its open transactions end, so that they start from 0 again.
    pub fn seq_exhausted(&self) -> bool {
        self.next_seq > u32::MAX / 2
    }

    /// Counters, with the current sizes.
    pub fn stats(&self) -> BufferStats {
        BufferStats {
            components: self.components.len(),
            objects: self.of_object.len(),
            bytes: self.bytes,
            ..self.stats.clone()
        }
    }

    /// Bytes of buffered effects.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Asserts the buffer's invariants (see the module's documentation).
    pub fn check(&self) {
        let mut listed = 0;
        for (key, component) in &self.components {
            assert!(!component.objects.is_empty(), "component {key:?} buffers nothing");
            assert!(component.ids.contains(key), "component {key:?} does not list its own id");
            for id in &component.ids {
                assert_eq!(self.alias.get(id), Some(key), "id {id:?} of component {key:?} does not resolve to it");
            }
            for (object, list) in &component.objects {
                assert_eq!(self.of_object.get(object), Some(key), "{object:?} is not labelled with {key:?}");
                // One transaction's effects on an object share its position.
                assert!(list.windows(2).all(|w| w[0].position <= w[1].position), "{object:?}: positions descend");
                listed += 1;
            }
        }
        assert_eq!(listed, self.of_object.len(), "an object is labelled with a component that does not list it");
        assert!(self.alias.values().all(|k| self.components.contains_key(k)), "an id resolves to no live component");
        assert_eq!(self.bytes, self.components.values().map(|c| c.bytes).sum::<usize>(), "bytes out of step");
    }
}

/// `deps` joined with `more` (componentwise maximum); `None` is the empty join.
fn join(deps: Option<VectorClock>, more: &VectorClock) -> Option<VectorClock> {
    let mut deps = deps.unwrap_or_else(|| more.clone());
    deps.merge_max(more);
    Some(deps)
}

#[cfg(test)]
mod tests;
