//! The ring: its slots, the claim counter, the floor that gates claims, the registry of
//! readers' positions, and the flags that say someone waits.
//!
//! # How a publish goes
//!
//! A writer reads the claim counter `tail` (the next offset) and the `floor`, a lower
//! bound on the oldest position any reader still needs. While `tail < floor + capacity`
//! it claims `tail` with one CAS, waits (in practice never) for the slot's previous lap
//! to be stamped, moves the old value out, writes its own, and stamps the slot with
//! `offset + 1` in one Release store. Readers read a slot when its stamp is their
//! position plus one; offsets never wrap, so a stamp never repeats (no ABA).
//!
//! When the ring looks full, the writer rescans the readers' positions (under the claim
//! lock, see below) and stores their minimum as the new floor: only then, once per lap at
//! most, does a writer read the readers' cache lines.
//!
//! # Registrations
//!
//! A reader attaching at a position, or seeking back, must not be overtaken by a writer
//! working from an older, higher floor. It takes the claim lock (bit 63 of `tail`: no
//! claim succeeds while it is set), checks its position against `tail - capacity`,
//! publishes it and lowers the floor to it, and unlocks. One writer can still claim with
//! the floor it read before the lock: the one whose CAS expected exactly the `tail` the
//! registration saw (the lock and unlock leave `tail`'s value as it was). That claim
//! overwrites offset `tail - capacity - 1`, one lap back, and the ring has one slot more
//! than its capacity so that this offset is never one a reader was allowed to attach at.
//! Rescans of the floor take the same lock, so a rescan never raises the floor over a
//! registration it did not see.
//!
//! # Batches
//!
//! A batch of `n` messages takes `n` consecutive offsets, all or none. It claims them
//! under the claim lock rather than with a CAS: with the lock held no registration can
//! race it, whereas a lock-free claim of `n` offsets with a floor older than a
//! registration would overwrite up to `n - 1` offsets the new reader may read (the spare
//! slot covers one). Two read-modify-writes per batch instead of one per message.
//!
//! # Dropping the oldest
//!
//! A ring made with [`RingConfig::drop_oldest`] never holds writers back for readers: a
//! claim always succeeds, and a reader left more than `capacity` behind moves to the
//! oldest message held and is told how many it missed. A reader then *pins* the offset it
//! reads: its entry says `offset | PIN` while it checks that no writer has claimed the
//! offset that overwrites it (`tail <= offset + capacity`), clones, and stores its next
//! position, unpinned. A writer that claimed offset `q` looks, before it overwrites offset
//! `q - lap`, whether an entry pins that offset and waits (the length of a clone) until it
//! does not. The two halves are a Dekker pairing on sequentially consistent accesses (the
//! pin's store then the load of `tail`; the claim's CAS then the loads of the entries): a
//! reader sees the claim and does not read, or the writer sees the pin and waits. The
//! floor, a lower bound of every position, spares writers the look while every reader is
//! more than a lap ahead of what they overwrite, which is all the time unless a reader
//! falls behind.
//!
//! # Waiting
//!
//! The ring never parks anyone itself. A reader that finds nothing sets `READERS_WAIT`,
//! fences, and looks again before it sleeps; a writer fences after its stamp and looks
//! at the flag: with a sequentially consistent fence on each side, one of the two sees
//! the other (Dekker's pattern), so a wake-up is never lost, and a writer with nobody
//! waiting touches no waiter list. Writers waiting for room are found the same way by
//! readers: a writer about to sleep stores the position the slowest reader must reach
//! for it to fit (`wake_at`), fences and rescans; a reader fences after every position
//! it stores and compares it with `wake_at`.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::registry::Registry;
use crate::sync::{fence, pause, AtomicU64, AtomicUsize, Cell, Ordering};

/// Bit 63 of `tail`: a registration or a rescan holds the claim counter.
pub(crate) const LOCKED: u64 = 1 << 63;
/// Bit 62 of `tail`: the ring is closed; no claim succeeds any more.
pub(crate) const CLOSED: u64 = 1 << 62;
/// The bits of `tail` that are not the offset.
const MARKS: u64 = LOCKED | CLOSED;
pub(crate) use crate::registry::FREE;
/// A group member's entry while it reads nothing.
pub(crate) const IDLE: u64 = u64::MAX - 1;
/// The largest offset a ring hands out: below the closed bit.
pub(crate) const MAX_OFFSET: u64 = CLOSED - 1;
/// In a ring that drops the oldest, a reader's (or member's) entry while it reads the
/// offset in the other bits (see the module's notes). Offsets are below it, and it is
/// below [`IDLE`] and [`FREE`].
pub(crate) const PIN: u64 = 1 << 62;
/// In a group's claim position: a member reserved the offset in the other bits while it
/// asks a predicate whether to take it (`Member::try_recv_if`). Scans mask it off as
/// they mask [`PIN`] (the same bit: a claim position is never pinned).
pub(crate) const RESERVED: u64 = PIN;
/// In a group's claim position: the group was detached ([`Group::detach`](crate::Group::detach));
/// the other bits keep where it stopped. Scans skip it, as they skip [`IDLE`] and
/// [`FREE`], which have the same bit set.
pub(crate) const DETACHED: u64 = 1 << 63;

/// Bit 63 of a slot's stamp: the value was moved out (by the reader of a ring that
/// hands each message to one reader, [`RingConfig::take`], or by the writer that evicted
/// it, or by the slot's next writer), so nobody else moves or drops it.
const TAKEN: u64 = 1 << 63;
/// Bit 62 of a slot's stamp: a writer that evicts the value is moving it out; the slot's
/// next writer waits for [`TAKEN`] before it writes (a move's length).
const MOVING: u64 = 1 << 62;
/// A stamp without its marks.
const SLOT_MARKS: u64 = TAKEN | MOVING;

const READERS_WAIT: usize = 1;
/// [`Ring::wake_at`] while no writer waits for room.
pub(crate) const NOBODY: u64 = u64::MAX;

/// A reader's memory of its last scan for parked writers (see [`Ring::reader_moved`]):
/// the wake position it scanned for, and the writers' wake-up count at the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scanned {
    at: u64,
    wakes: u64,
}

impl Scanned {
    /// No scan remembered: the next move past a wake position scans.
    pub(crate) const NONE: Scanned = Scanned {
        at: NOBODY,
        wakes: u64::MAX,
    };
}

/// Who is woken when the ring's flags say someone waits: implemented by the front that
/// parks readers and writers (the `blocking` module's, or an async one's wait lists).
///
/// The ring calls these after clearing the readers' flag (for readers) or the writers'
/// wake position (for writers), from the thread that published, read, closed the ring,
/// detached or sought a reader, advanced a [`Hold`](crate::Hold), or passed a wake-up
/// on. Each waiter that still has to wait once woken announces itself again before it
/// sleeps.
///
/// Writers: wake every one, or, for a front that keeps its writers in line, those in
/// front whose room is free ([`Room`]), announcing the first of the others again. Readers: wake every broadcast [`Reader`](crate::Reader); group
/// members may be woken one at a time (a front that wakes one member per message, so
/// that one message does not wake a whole group). A front that leaves any reader or
/// member waiting calls [`Rearm::others_wait`] before it wakes anyone: the next publish
/// then wakes again, and a woken member that receives a message while more are ready,
/// or finds the ring closed, wakes again too (it passes the wake on), so a message
/// published while the flag was clear, or a close, does not leave a member asleep. Such a
/// front must also pass the wake on itself when a woken member stops waiting before it
/// receives (a dropped future, a deadline): the ring cannot see that.
pub trait Waiters {
    /// Something was published: wake every waiting reader, and one or more waiting
    /// members of each group (see the trait's notes and `rearm`).
    fn wake_readers(&self, rearm: Rearm<'_>);
    /// Readers moved (or left): wake the writers waiting for room (see the trait's notes
    /// and `room`).
    fn wake_writers(&self, room: Room<'_>);
}

/// Handed to [`Waiters::wake_writers`]: what a front that keeps its writers in line
/// (wakes those in front while their room is free, and not the others) asks the ring.
/// The ring calls `wake_writers` with none of its locks held, so a front may ask it from
/// there; the front must not hold a lock of its own that a writer takes before it calls
/// the ring.
pub struct Room<'a> {
    ring: &'a dyn RoomOf,
}

impl fmt::Debug for Room<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Room").finish_non_exhaustive()
    }
}

impl Room<'_> {
    /// [`Ring::free_slots`].
    pub fn free(&self) -> u64 {
        self.ring.free_slots()
    }

    /// The writers' wake position was cleared to wake them; a front that leaves writers
    /// waiting announces the first one's need (`n` slots) again here, as
    /// [`Ring::prepare_batch_publisher_wait`] does. Returns `false` if the room is free
    /// already (the front then wakes it rather than leave it waiting).
    pub fn wait_for(&self, n: usize) -> bool {
        self.ring.wait_for(n)
    }
}

/// What a [`Room`] asks of its ring, whatever the ring's types.
trait RoomOf {
    fn free_slots(&self) -> u64;
    fn wait_for(&self, n: usize) -> bool;
}

impl<T, W: Waiters> RoomOf for Ring<T, W> {
    fn free_slots(&self) -> u64 {
        Ring::free_slots(self)
    }

    fn wait_for(&self, n: usize) -> bool {
        self.prepare_batch_publisher_wait(n)
    }
}

/// Moves the values in `from` to `to`: with `from`'s buffer if `to` is empty (no
/// allocation), else appended. `from` is left empty.
fn hand_over<T>(from: &mut Vec<T>, to: &mut Vec<T>) {
    if to.is_empty() {
        core::mem::swap(from, to);
        from.clear();
    } else {
        to.append(from);
    }
}

/// Handed to [`Waiters::wake_readers`]: sets the readers' flag again for a front that
/// leaves some waiting.
#[derive(Debug)]
pub struct Rearm<'a> {
    flags: &'a AtomicUsize,
    ready: usize,
}

impl Rearm<'_> {
    /// How many messages the call that wakes made ready: a batch's length for a batch
    /// published, 1 otherwise (a message published, a wake-up passed on, a close). A
    /// front that wakes group members one per message wakes up to this many of each
    /// group, as each member woken wakes the next while more are ready.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// Readers (or members) are left waiting: the next publish wakes again, and so does
    /// a woken member that receives while more messages are ready. Call it before waking
    /// anyone, so that whoever is woken finds the flag set.
    pub fn others_wait(self) {
        self.flags.fetch_or(READERS_WAIT, Ordering::SeqCst);
        // The other half of a writer's fence after its stamp (see `Ring::member_moved`).
        crate::sync::loom_sc_fence();
    }
}

/// [`Waiters`] for a ring whose users never wait: nothing to wake.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWaiters;

impl Waiters for NoWaiters {
    #[inline]
    fn wake_readers(&self, _: Rearm<'_>) {}
    #[inline]
    fn wake_writers(&self, _: Room<'_>) {}
}

/// Why a ring could not be made or a reader not attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// A capacity of zero: nothing could ever be published.
    ZeroCapacity,
    /// More slots than memory, or than offsets can index.
    CapacityTooLarge,
    /// No entry for another reader (or group) can be had: memory ran out, or about
    /// sixteen million times [`RingConfig::readers`] are attached.
    TooManyReaders,
    /// A ring that hands each message to one reader ([`RingConfig::take`]) has a reader
    /// or a group attached already.
    OneReaderOnly,
    /// A first offset ([`RingConfig::first_offset`]) so large that the ring could not
    /// hold one lap after it.
    FirstOffsetTooLarge,
    /// A [`Hold`](crate::Hold) on a ring whose receives move messages out
    /// ([`RingConfig::take`]): nothing stays to read again.
    TakingRing,
    /// A start position past the end of what was published.
    PastEnd {
        /// The position asked for.
        asked: u64,
        /// The next offset to be published.
        end: u64,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::ZeroCapacity => f.write_str("a ring needs a capacity of at least 1"),
            RingError::CapacityTooLarge => f.write_str("the ring's capacity cannot be allocated"),
            RingError::TooManyReaders => {
                f.write_str("no entry for another reader of the ring can be allocated")
            }
            RingError::OneReaderOnly => f.write_str(
                "a ring whose reads move messages out takes one reader or one group at a time",
            ),
            RingError::FirstOffsetTooLarge => {
                f.write_str("the ring's first offset leaves no room for its offsets")
            }
            RingError::TakingRing => f.write_str(
                "a ring whose receives move messages out keeps nothing for a hold to read again",
            ),
            RingError::PastEnd { asked, end } => write!(
                f,
                "position {asked} is past the end of the ring (next offset {end})"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RingError {}

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The oldest message still in the ring.
    Earliest,
    /// The next message published.
    Latest,
    /// This offset, or the oldest still in the ring if it is gone (the reader's first
    /// receive then reports how many it missed).
    Offset(u64),
}

/// The size of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Messages the ring holds.
    pub capacity: usize,
    /// Broadcast readers and group members the ring makes entries for up front (rounded
    /// up to a power of two). More can attach: entries are added in chunks, each twice
    /// the last, and kept until the ring drops.
    pub readers: usize,
    /// Groups the ring makes entries for up front, as for `readers`.
    pub groups: usize,
    /// Each message is received once, by the one reader or by one member of the one
    /// group attached at a time, and a receive moves it out instead of cloning it: a
    /// queue, as memq's topics that release on read are. Attaching a second reader or
    /// group is [`RingError::OneReaderOnly`].
    pub take: bool,
    /// Writers never wait for readers: a reader (or group) left more than `capacity`
    /// messages behind loses the oldest and is told how many
    /// ([`TryRecvError::Lagged`](crate::TryRecvError::Lagged)), as memq's topics that
    /// drop the oldest are. Without it, writers do not overwrite what an attached reader
    /// has not read.
    pub drop_oldest: bool,
    /// The offset of the ring's first message (0 unless the log goes on from one kept
    /// elsewhere, as a durable topic's, or starts where memq's `next_offsets` says).
    /// At most `2^62 - 1 - 2 × capacity`.
    pub first_offset: u64,
}

impl RingConfig {
    /// A ring of `capacity` messages with entries for 64 readers and 16 groups up front.
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            readers: 64,
            groups: 16,
            take: false,
            drop_oldest: false,
            first_offset: 0,
        }
    }
}

/// A successful publish.
#[derive(Debug)]
pub struct Published<T> {
    /// The message's offset.
    pub offset: u64,
    /// The message `capacity` offsets back, which left the ring's window with this one,
    /// every reader being past it: the caller drops it (outside any lock it holds).
    /// `None` while the ring is not full yet, or when a reader attached at that message
    /// meanwhile (it leaves with the next publish).
    pub evicted: Option<T>,
}

/// Of two values moved out by one publish, one to hand back; the other (a publish moves
/// out two only when it raced a registration or a late writer) is dropped here.
#[inline]
fn newest<T>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (a, None) => a,
        (None, b) => b,
        (Some(a), b) => {
            drop(a);
            b
        }
    }
}

/// Why a publish did not go through; the value comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum TryPublishError<T> {
    /// The attached readers hold every slot.
    Full(T),
    /// The ring is closed ([`Ring::close`]).
    Closed(T),
}

impl<T> TryPublishError<T> {
    /// The value that was not published.
    pub fn into_inner(self) -> T {
        match self {
            TryPublishError::Full(v) | TryPublishError::Closed(v) => v,
        }
    }
}

/// Where a registration put its reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attached {
    /// Its position.
    pub(crate) pos: u64,
    /// Messages between the position asked for and the one given (gone already).
    pub(crate) missed: u64,
}

struct Slot<T> {
    /// `offset + 1` of the value held, 0 before the first lap reaches the slot.
    seq: AtomicU64,
    value: Cell<MaybeUninit<T>>,
}

/// `lap` empty slots (stamp 0, no value), or `None` if they cannot be allocated.
///
/// Zeroed memory from the allocator, which for a large ring comes as fresh pages of the
/// system's that become resident only as the first lap writes them: a ring of a million
/// slots per partition costs memory as messages arrive, as memq's locked log does (a
/// `Vec` filled slot by slot would write every page at once). Written here rather than
/// with a crate: the one step is an allocation whose bytes are all zero.
#[cfg(not(loom))]
fn new_slots<T>(lap: usize) -> Option<Box<[Slot<T>]>> {
    let layout = core::alloc::Layout::array::<Slot<T>>(lap).ok()?;
    // A slot holds its stamp, so a ring of at least one slot has bytes to allocate.
    debug_assert!(layout.size() > 0);
    // SAFETY: `layout` has a non-zero size (each slot has an `AtomicU64`, and `lap >= 1`
    // since the capacity is at least 1).
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<Slot<T>>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `layout`, which is that of `[Slot<T>; lap]`
    // (as `Box<[Slot<T>]>` frees it: `Layout::for_value` of the slice), aligned and
    // non-null. All-zero bytes are a valid `Slot<T>`: an `AtomicU64` holding 0 (the
    // empty stamp) and a cell of `MaybeUninit<T>`, which any bytes are (`Cell` is an
    // `UnsafeCell` outside loom). The box owns the memory from here on.
    Some(unsafe {
        debug_assert!(p.is_aligned());
        Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, lap))
    })
}

/// Under loom, whose atomics and cells are not valid as zero bytes, slot by slot.
#[cfg(loom)]
fn new_slots<T>(lap: usize) -> Option<Box<[Slot<T>]>> {
    let mut slots = Vec::new();
    slots.try_reserve_exact(lap).ok()?;
    slots.extend((0..lap).map(|_| Slot {
        seq: AtomicU64::new(0),
        value: Cell::new(MaybeUninit::uninit()),
    }));
    Some(slots.into_boxed_slice())
}

/// A bounded log of offsets `0, 1, 2, …` in a ring of slots, written by any number of
/// writers and read by broadcast readers ([`Reader`](crate::Reader)) and groups
/// ([`Group`](crate::Group)), without a lock on any message's path.
///
/// Writers never overwrite a message an attached reader has not passed (`Block`); with
/// no reader attached, the oldest message makes room for the newest.
pub struct Ring<T, W = NoWaiters> {
    slots: Box<[Slot<T>]>,
    capacity: u64,
    /// Slots: `capacity + 1` (see the module's notes on registrations).
    lap: u64,
    /// [`RingConfig::first_offset`]: no offset before it ever existed.
    base: u64,
    /// How many slots must be free before a waiting writer is woken (unless its batch
    /// needs more): `capacity / 16`, 1 to 64, as memq's topics; also how often a writer
    /// of a ring that drops the oldest rescans the floor while a reader lags.
    wake_batch: u64,
    tail: CachePadded<AtomicU64>,
    floor: CachePadded<AtomicU64>,
    /// Groups' claim positions: scanned before `cursors` (see `Group`).
    claims: Registry,
    /// Broadcast readers' positions and group members' hazards.
    cursors: Registry,
    /// [`RingConfig::drop_oldest`].
    drop_oldest: bool,
    /// [`READERS_WAIT`] while a reader may be waiting for a message.
    flags: CachePadded<AtomicUsize>,
    /// Since writers announced that they wait for room: the lowest position they asked
    /// the slowest reader to reach (`max(n, wake_batch)` slots free), or a lower one: a
    /// writer that announced may have found room and not waited, or worked its need out
    /// from an older end. Cleared to [`NOBODY`] when writers are woken. A reader compares
    /// its position with it after every message (see [`Ring::reader_moved`]).
    wake_at: CachePadded<AtomicU64>,
    /// How many times the writers were woken: bumped before [`Ring::wake_at`] is
    /// cleared, so that a reader that sees a wake position set after the clear sees the
    /// new count too, and its memory of an earlier scan ([`Scanned`]) no longer holds.
    /// That takes every write of `wake_at` to be a read-modify-write (`swap`,
    /// `fetch_min`): a reader's acquiring load of a position set after a clear then
    /// synchronises with the clear, which came after the bump. Never a plain store.
    wakes: CachePadded<AtomicU64>,
    /// [`RingConfig::take`].
    take: bool,
    /// Readers and groups attached (counted only when `take`, which allows one).
    attached: AtomicUsize,
    /// When `take`: where the last reader or group left off, or the reader's position when
    /// it seeks. Everything before it was moved out, so nobody attaches or seeks there.
    taken_to: AtomicU64,
    waiters: W,
}

// SAFETY: values move in from one thread and out to another (`Send`), and readers clone
// them through shared references from several threads at once (`Sync`); every access to
// a slot's cell is ordered by its stamp (see `write` and `read_at`).
unsafe impl<T: Send + Sync, W: Send> Send for Ring<T, W> {}
// SAFETY: as for `Send`; `W` is called from every thread that publishes or reads.
unsafe impl<T: Send + Sync, W: Sync> Sync for Ring<T, W> {}

impl<T, W: Waiters> fmt::Debug for Ring<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity)
            .field("tail", &self.end())
            .finish_non_exhaustive()
    }
}

fn registry(n: usize) -> Result<Registry, RingError> {
    Registry::new(n).ok_or(RingError::CapacityTooLarge)
}

impl<T, W: Waiters> Ring<T, W> {
    /// An empty ring of `config.capacity` messages, which calls `waiters` when readers or
    /// writers wait.
    pub fn with_waiters(config: RingConfig, waiters: W) -> Result<Self, RingError> {
        if config.capacity == 0 {
            return Err(RingError::ZeroCapacity);
        }
        let lap = config
            .capacity
            .checked_add(1)
            .ok_or(RingError::CapacityTooLarge)?;
        let slots = new_slots(lap).ok_or(RingError::CapacityTooLarge)?;
        let capacity = config.capacity as u64;
        let base = config.first_offset;
        if base > MAX_OFFSET.saturating_sub(capacity.saturating_mul(2).saturating_add(2)) {
            return Err(RingError::FirstOffsetTooLarge);
        }
        Ok(Self {
            slots,
            capacity,
            lap: lap as u64,
            wake_batch: (capacity / 16).clamp(1, 64),
            base,
            tail: CachePadded::new(AtomicU64::new(base)),
            floor: CachePadded::new(AtomicU64::new(base)),
            claims: registry(config.groups)?,
            cursors: registry(config.readers)?,
            drop_oldest: config.drop_oldest,
            flags: CachePadded::new(AtomicUsize::new(0)),
            wake_at: CachePadded::new(AtomicU64::new(NOBODY)),
            wakes: CachePadded::new(AtomicU64::new(0)),
            take: config.take,
            attached: AtomicUsize::new(0),
            taken_to: AtomicU64::new(base),
            waiters,
        })
    }

    /// Messages the ring holds at most.
    #[inline]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The next offset to be published (claimed, perhaps not written yet).
    #[inline]
    pub fn end(&self) -> u64 {
        self.tail.load(Ordering::Acquire) & !MARKS
    }

    /// Whether the ring is closed.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.tail.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Whether receives move values out ([`RingConfig::take`]).
    #[inline]
    pub(crate) fn takes(&self) -> bool {
        self.take
    }

    /// Whether writers overwrite what readers have not read ([`RingConfig::drop_oldest`]).
    #[inline]
    pub fn drops_oldest(&self) -> bool {
        self.drop_oldest
    }

    /// Closes the ring: publishes fail from now on ([`TryPublishError::Closed`]), and
    /// readers receive what was published before, then learn that it is closed.
    /// Waiting readers and writers are woken.
    pub fn close(&self) {
        self.tail.fetch_or(CLOSED, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.wake_readers(1);
        self.wake_writers();
    }

    /// The oldest offset the ring holds: where a reader attaching at [`Start::Earliest`]
    /// now would start (a snapshot). The ring holds `capacity` messages at most, so it is
    /// [`Ring::end`] less the capacity, or the first offset while fewer were published;
    /// in a taking ring, not before what its reader took.
    pub fn first(&self) -> u64 {
        let mut oldest = self.end().saturating_sub(self.capacity).max(self.base);
        if self.take {
            oldest = oldest.max(self.taken_to.load(Ordering::Acquire));
        }
        oldest
    }

    /// Whether a writer announced that it waits for room and the writers were not woken
    /// since (a hint: a writer that announced may have found room and not waited, and by
    /// the time this is read a writer may be gone).
    pub fn writers_wait(&self) -> bool {
        self.wake_at.load(Ordering::Acquire) != NOBODY
    }

    /// The waiters this ring calls.
    #[inline]
    pub fn waiters(&self) -> &W {
        &self.waiters
    }

    #[inline]
    fn slot(&self, offset: u64) -> &Slot<T> {
        // `lap` is `slots.len()`, so the index is in bounds.
        &self.slots[(offset % self.lap) as usize]
    }

    // ----- publishing --------------------------------------------------------------

    /// Publishes `value` unless attached readers hold every slot or the ring is closed
    /// (then it comes back in the error). Never waits for readers; waits only, and in
    /// practice never, for a writer of the previous lap of the same slot that claimed
    /// it and has not written it yet, which can happen only with no reader attached.
    #[inline]
    pub fn try_publish(&self, value: T) -> Result<Published<T>, TryPublishError<T>> {
        let offset = match self.claim() {
            Claim::Offset(o) => o,
            Claim::Full => return Err(TryPublishError::Full(value)),
            Claim::Closed => return Err(TryPublishError::Closed(value)),
        };
        if self.drop_oldest {
            self.wait_for_pins(offset, self.lap);
        }
        let overwritten = self.write(offset, value);
        self.after_write(1);
        let evicted = newest(overwritten, self.evict_behind(offset));
        let late = self.evict_if_left(offset);
        Ok(Published {
            offset,
            evicted: newest(evicted, late),
        })
    }

    /// Publishes every value of `values` (drained, in order) at consecutive offsets, all
    /// or none, and returns the first offset (the ring's end for an empty batch). Values
    /// the batch moves out of the ring, every reader being past them, go to `evicted` for
    /// the caller to drop: they take the places of the values published in `values`'s
    /// own buffer, which then moves to `evicted` if `evicted` is empty (else they are
    /// appended), so that a batch allocates nothing; `values` is left empty.
    /// When the readers hold too many slots, or the batch is larger than the ring's
    /// capacity (it could never fit), `Full`, and `values` is left as it was; `Closed` once
    /// the ring is closed.
    pub fn try_publish_batch(
        &self,
        values: &mut Vec<T>,
        evicted: &mut Vec<T>,
    ) -> Result<u64, TryPublishError<()>> {
        let n = values.len() as u64;
        if n <= 1 {
            return match values.pop() {
                None if self.is_closed() => Err(TryPublishError::Closed(())),
                None => Ok(self.end()),
                Some(v) => match self.try_publish(v) {
                    Ok(p) => {
                        values.extend(p.evicted);
                        hand_over(values, evicted);
                        Ok(p.offset)
                    }
                    Err(e) => {
                        let full = matches!(e, TryPublishError::Full(_));
                        values.push(e.into_inner());
                        Err(if full {
                            TryPublishError::Full(())
                        } else {
                            TryPublishError::Closed(())
                        })
                    }
                },
            };
        }
        let first = self.claim_batch(n)?;
        // No user code runs between the claim and the last stamp (a drop or a callback
        // that panicked there would leave claimed offsets unwritten, and readers and the
        // next lap's writers waiting for them for ever): the values moved out wait in
        // `values`'s buffer, for the caller to drop.
        let len = values.len();
        let base = values.as_mut_ptr();
        // SAFETY: from here until its length is set again below, `values` owns none of
        // its elements: they are moved out one by one, and a panic in between (there is
        // no user code here, only debug assertions) leaks them instead of dropping one
        // twice.
        unsafe { values.set_len(0) };
        // Elements `0..kept` hold values moved out of the ring.
        let mut kept = 0;
        for (i, offset) in (first..first + n).enumerate() {
            debug_assert!(kept <= i && i < len);
            if self.drop_oldest {
                self.wait_for_pins(offset, self.lap);
            }
            // SAFETY: `i < len`, and element `i` was initialised and is read only here
            // (the values moved out are written at `kept <= i`, and only at places read
            // before).
            let value = unsafe { base.add(i).read() };
            if let Some(old) = self.write(offset, value) {
                // SAFETY: `kept <= i < len` (within the capacity): the value at `kept` was
                // read out already (at this step or before), so nothing live is
                // overwritten.
                unsafe { base.add(kept).write(old) };
                kept += 1;
            }
        }
        // SAFETY: elements `0..kept` were written above with the values moved out of the
        // ring; the others were moved into it.
        unsafe { values.set_len(kept) };
        self.after_write(n as usize);
        for offset in first..first + n {
            values.extend(self.evict_behind(offset));
        }
        for offset in first..first + n {
            values.extend(self.evict_if_left(offset));
        }
        hand_over(values, evicted);
        Ok(first)
    }

    /// Claims `n` (two or more) consecutive offsets under the claim lock.
    fn claim_batch(&self, n: u64) -> Result<u64, TryPublishError<()>> {
        if n > self.capacity {
            return Err(TryPublishError::Full(()));
        }
        let t = self.lock_tail();
        if self.tail.load(Ordering::Relaxed) & CLOSED != 0 {
            self.unlock_tail();
            return Err(TryPublishError::Closed(()));
        }
        let fits = t.saturating_add(n) <= MAX_OFFSET
            && (self.drop_oldest
                || t + n
                    <= self
                        .floor
                        .load(Ordering::SeqCst)
                        .saturating_add(self.capacity)
                || t + n <= self.rescan_floor(t).saturating_add(self.capacity));
        if fits {
            // Unlocks and claims in one step, unless a close came meanwhile: then its
            // readers may have been told the ring ended at `t`, and the batch fails.
            if self
                .tail
                .compare_exchange(t | LOCKED, t + n, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(t);
            }
            self.unlock_tail();
            Err(TryPublishError::Closed(()))
        } else {
            self.unlock_tail();
            Err(TryPublishError::Full(()))
        }
    }

    /// In a ring that drops the oldest, before the writer of `offset` moves out the
    /// message `back` offsets behind it (`lap`: the one its slot holds; `capacity`: the
    /// one it evicts): waits while a reader pins that offset (see the module's notes).
    /// Looks at the entries only if the floor says a reader may be that far behind,
    /// rescanning the floor at most once every `wake_batch` offsets while one is.
    #[inline]
    fn wait_for_pins(&self, offset: u64, back: u64) {
        let Some(old) = offset.checked_sub(back).filter(|o| *o >= self.base) else {
            return;
        };
        if old < self.floor.load(Ordering::Acquire) {
            return;
        }
        self.look_for_pins(old);
    }

    #[cold]
    #[inline(never)]
    fn look_for_pins(&self, old: u64) {
        let floor = self.floor.load(Ordering::Acquire);
        if old.is_multiple_of(self.wake_batch) || old >= floor.saturating_add(self.lap) {
            let floor = self.rescan_floor(self.lock_tail());
            self.unlock_tail();
            if old < floor {
                return;
            }
        }
        // The other half of a reader's pin: its store, then its load of `tail`.
        crate::sync::loom_sc_fence();
        for entry in self.cursors.iter_taken() {
            let mut spins = 0;
            while entry.load(Ordering::SeqCst) == old | PIN {
                pause(&mut spins);
            }
        }
    }

    /// Claims the next offset.
    #[inline]
    fn claim(&self) -> Claim {
        let mut spins = 0;
        loop {
            // `tail` before `floor`: a floor lowered by a registration is seen by every
            // claim that reads the `tail` its unlock left (see the module's notes).
            let t = self.tail.load(Ordering::Acquire);
            if t & MARKS != 0 {
                if t & CLOSED != 0 {
                    return Claim::Closed;
                }
                pause(&mut spins);
                continue;
            }
            let floor = self.floor.load(Ordering::Acquire);
            if !self.drop_oldest && t >= floor.saturating_add(self.capacity) {
                if !self.refresh_floor() {
                    return Claim::Full;
                }
                continue;
            }
            if t >= MAX_OFFSET {
                return Claim::Full;
            }
            if self
                .tail
                .compare_exchange_weak(t, t + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return Claim::Offset(t);
            }
        }
    }

    /// Writes `value` at its claimed `offset` and stamps the slot; returns the value of
    /// the slot's previous lap.
    #[inline]
    fn write(&self, offset: u64, value: T) -> Option<T> {
        let slot = self.slot(offset);
        // The previous lap's stamp, 0 if the slot was never written.
        let prev = offset
            .checked_sub(self.lap)
            .filter(|p| *p >= self.base)
            .map_or(0, |p| p + 1);
        let mut spins = 0;
        // Whether the previous lap's value is gone already (moved out by a taking reader
        // or evicted by the writer `capacity` offsets after it); if not, this writer takes
        // it, with a CAS that the evicting writer may race.
        let taken = loop {
            let s = slot.seq.load(Ordering::Acquire);
            if s & !SLOT_MARKS == prev {
                if s & MOVING != 0 {
                    pause(&mut spins);
                    continue;
                }
                if prev == 0 || s & TAKEN != 0 {
                    break true;
                }
                if slot
                    .seq
                    .compare_exchange(s, s | TAKEN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    break false;
                }
                continue;
            }
            debug_assert!(
                s & !SLOT_MARKS < prev,
                "slot of offset {offset} stamped {s} ahead of its lap"
            );
            pause(&mut spins);
        };
        let evicted = slot.value.with_mut(|p| {
            // SAFETY: this writer claimed `offset`, and no other writer can claim the same
            // slot before this one stamps it (the next lap's writer waits for the stamp
            // above, as this one did for `prev`). No reader reads the previous lap's
            // value: a claim needs `offset < floor + capacity` with the floor at most every
            // attached reader's position, or, for the one claim a registration can race
            // with, a reader attached at `offset - capacity` or later (module notes); so
            // every reader that could read offset `prev - 1` has moved past it, and its
            // Release store of that position came before the floor this claim read
            // (through the rescan that Acquire-loaded it), so its clone is finished. In a
            // ring that drops the oldest, no reader reads it either: `wait_for_pins`
            // either found the floor (a lower bound of every position, so of every pin)
            // past `prev - 1`, or saw no entry pinning it after this claim, so a reader
            // that pins it later sees this claim and does not read (a Dekker pairing,
            // module notes), and one that pinned it before stored its next position,
            // unpinned, with Release after its clone, and that store was the one seen. When `prev > 0` the cell
            // holds that lap's value, written before its stamp, which the Acquire load
            // above saw, unless it was moved out (`taken`): by a taking reader, whose mark
            // came before its position's Release store, or by the writer that evicted it,
            // whose CAS came first; otherwise this writer's CAS made the value its own.
            unsafe {
                debug_assert!(prev == 0 || slot.seq.load(Ordering::Relaxed) & !TAKEN == prev);
                debug_assert!(slot.seq.load(Ordering::Relaxed) & MOVING == 0);
                let old = if taken {
                    None
                } else {
                    Some((*p).assume_init_read())
                };
                (*p).write(value);
                old
            }
        });
        slot.seq.store(offset + 1, Ordering::Release);
        evicted
    }

    /// After publishing `offset`: moves out the message `capacity` offsets behind it, the
    /// one that just left the ring's window, so that the ring keeps `capacity` values
    /// alive, not `capacity + 1` (its slot's next writer would move it out otherwise).
    /// Left in place if a reader may still read it: a registration lowered the floor to
    /// it after this writer's claim, or (in a ring that drops the oldest) a reader pins it
    /// and this waits; or if its writer has not stamped it yet.
    #[inline]
    fn evict_behind(&self, offset: u64) -> Option<T> {
        let old = offset
            .checked_sub(self.capacity)
            .filter(|o| *o >= self.base)?;
        if self.drop_oldest {
            self.wait_for_pins(offset, self.capacity);
        } else if old >= self.floor.load(Ordering::SeqCst) {
            return None;
        }
        let slot = self.slot(old);
        let s = slot.seq.load(Ordering::Acquire);
        if s != old + 1
            || slot
                .seq
                .compare_exchange(s, s | MOVING, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        let value = slot.value.with_mut(|p| {
            // SAFETY: the stamp `old + 1`, seen by the CAS that marked it moving, was
            // stored (Release) after the value was written, and that CAS makes this writer
            // the one that moves it out: the slot's next writer waits until the mark
            // becomes `TAKEN` (stored below, after the move) and then leaves the cell
            // alone until it writes, and its own CAS for the value fails. No reader
            // reads `old`: in a ring that waits for readers, the floor (a lower bound of
            // every position, lowered before any registration's reader may read) is past
            // it, and every reader past it stored its position (Release) after its clone,
            // which the rescans that raised the floor loaded; in one that drops the oldest,
            // `wait_for_pins` found the floor past it or saw no pin on it after this claim
            // (module notes).
            unsafe {
                debug_assert_eq!(slot.seq.load(Ordering::Relaxed), (old + 1) | MOVING);
                (*p).assume_init_read()
            }
        });
        slot.seq.store((old + 1) | TAKEN, Ordering::Release);
        Some(value)
    }

    /// After publishing `offset` and the fence after its stamp: if the message `capacity`
    /// offsets after it was claimed meanwhile, its writer may have found `offset` not
    /// stamped yet and left it, so this writer evicts its own message. (Both fence
    /// between their store and their load, a Dekker pairing: one of them sees the other.)
    #[inline]
    fn evict_if_left(&self, offset: u64) -> Option<T> {
        let after = offset.checked_add(self.capacity)?;
        if self.end() <= after {
            return None;
        }
        self.evict_behind(after)
    }

    /// After the stamps of `ready` messages: wakes waiting readers if the flag says
    /// there are any.
    #[inline]
    fn after_write(&self, ready: usize) {
        // Orders the stamp before the flag's load, against a reader's flag set before
        // its second look at the stamp (Dekker's pattern).
        fence(Ordering::SeqCst);
        if self.flags.load(Ordering::Relaxed) & READERS_WAIT != 0 {
            self.wake_readers(ready);
        }
    }

    /// Clears the readers' flag and, if it was set, wakes the waiting readers (`ready`:
    /// see [`Rearm::ready`]).
    #[cold]
    fn wake_readers(&self, ready: usize) {
        if self.flags.fetch_and(!READERS_WAIT, Ordering::SeqCst) & READERS_WAIT != 0 {
            self.waiters.wake_readers(Rearm {
                flags: &self.flags,
                ready,
            });
        }
    }

    /// Clears the writers' wake position and, if one was set, wakes the waiting writers
    /// (each that still finds no room sets it again before it sleeps).
    #[cold]
    fn wake_writers(&self) {
        // Before the clear (see `wakes`); a bump without a wake-up only costs readers a
        // scan.
        self.wakes.fetch_add(1, Ordering::SeqCst);
        if self.wake_at.swap(NOBODY, Ordering::SeqCst) != NOBODY {
            self.waiters.wake_writers(Room { ring: self });
        }
    }

    /// Whether a publish of `n` messages would find room now (a snapshot: other writers
    /// may take it first). Rescans the readers' positions when the cached floor says the
    /// ring is full, which takes the claim lock for a moment. A ring that drops the
    /// oldest, a closed ring (whose publishes fail at once) and a batch that can never
    /// fit (its publish fails at once rather than wait) are said to have room. For a
    /// front that keeps waiting writers in line and asks whether the first one fits.
    pub fn has_room(&self, n: usize) -> bool {
        self.has_room_for(n as u64)
    }

    /// How many messages a publish could add now (a snapshot, which other writers and
    /// readers change at once): the capacity less what the slowest reader has not read,
    /// from a rescan of the readers' positions under the claim lock; the capacity in a
    /// ring that drops the oldest. For a front that keeps waiting writers in line and
    /// wakes those whose room is free.
    pub fn free_slots(&self) -> u64 {
        if self.drop_oldest {
            return self.capacity;
        }
        let t = self.lock_tail();
        let floor = self.rescan_floor(t);
        self.unlock_tail();
        floor.saturating_add(self.capacity).saturating_sub(t)
    }

    /// [`Ring::has_room`]; for a writer about to wait, after it stored its wake position.
    pub(crate) fn has_room_for(&self, n: u64) -> bool {
        if self.is_closed() || self.drop_oldest || n > self.capacity {
            return true;
        }
        let t = self.end();
        t + n
            <= self
                .floor
                .load(Ordering::SeqCst)
                .saturating_add(self.capacity)
            || self.refresh_floor_for(n)
    }

    /// Rescans the readers' positions under the claim lock and stores their minimum as
    /// the floor (`tail` if no reader is attached: everything may be overwritten).
    /// Returns whether the next claim has room.
    #[cold]
    #[inline(never)]
    fn refresh_floor(&self) -> bool {
        self.refresh_floor_for(1)
    }

    /// [`Ring::refresh_floor`] for a publish of `n` messages.
    #[cold]
    #[inline(never)]
    fn refresh_floor_for(&self, n: u64) -> bool {
        let t = self.lock_tail();
        let floor = self.rescan_floor(t);
        self.unlock_tail();
        t + n <= floor.saturating_add(self.capacity)
    }

    /// With the claim lock held and `tail` at `t`: stores the readers' minimum position
    /// as the floor (`t` if no reader is attached: everything may be overwritten) and
    /// returns it.
    fn rescan_floor(&self, t: u64) -> u64 {
        let floor = self.min_position().unwrap_or(t);
        self.floor.store(floor, Ordering::SeqCst);
        floor
    }

    /// The smallest position an attached reader or group needs, if any is attached.
    /// Claims first, then members' hazards (see `Member::try_recv`).
    fn min_position(&self) -> Option<u64> {
        let mut min = FREE;
        let mut look = |c: &CachePadded<AtomicU64>| {
            let pos = c.load(Ordering::SeqCst);
            // Skips free and idle entries and detached groups (see `DETACHED`).
            if pos & DETACHED == 0 {
                min = min.min(pos & !PIN);
            }
        };
        self.claims.iter().for_each(&mut look);
        // After the claims: the count of entries taken, then the entries (a member's
        // hazard can be in a chunk its own thread published, which only the count, in
        // the same total order as the hazard, makes this scan see).
        self.cursors.iter_taken().for_each(&mut look);
        (min != FREE).then_some(min)
    }

    fn lock_tail(&self) -> u64 {
        let mut spins = 0;
        loop {
            let t = self.tail.load(Ordering::Relaxed);
            if t & LOCKED == 0
                && self
                    .tail
                    .compare_exchange_weak(t, t | LOCKED, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                return t & !MARKS;
            }
            pause(&mut spins);
        }
    }

    fn unlock_tail(&self) {
        self.tail.fetch_and(!LOCKED, Ordering::SeqCst);
    }

    // ----- readers' entries --------------------------------------------------------

    /// Attaches a broadcast reader at `start`; returns its entry and where it starts.
    pub(crate) fn attach_reader(&self, start: Start) -> Result<(usize, Attached), RingError> {
        self.attach_in(&self.cursors, start)
    }

    /// Attaches a group's claim position at `start`.
    pub(crate) fn attach_group(&self, start: Start) -> Result<(usize, Attached), RingError> {
        self.attach_in(&self.claims, start)
    }

    fn attach_in(&self, registry: &Registry, start: Start) -> Result<(usize, Attached), RingError> {
        if self.take
            && self
                .attached
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return Err(RingError::OneReaderOnly);
        }
        let placed = registry
            .take(IDLE)
            .ok_or(RingError::TooManyReaders)
            .and_then(|index| match self.place(registry.get(index), start) {
                Ok(at) => Ok((index, at)),
                Err(e) => {
                    registry.get(index).store(FREE, Ordering::Release);
                    Err(e)
                }
            });
        if placed.is_err() && self.take {
            self.attached.store(0, Ordering::Release);
        }
        placed
    }

    /// Attaches a hold's position at `start`, among the groups' claim positions (a hold
    /// is not counted as a reader: [`Hold`](crate::Hold) refuses taking rings).
    pub(crate) fn attach_hold(&self, start: Start) -> Result<(usize, Attached), RingError> {
        let index = self.claims.take(IDLE).ok_or(RingError::TooManyReaders)?;
        match self.place(self.claims.get(index), start) {
            Ok(at) => Ok((index, at)),
            Err(e) => {
                self.claims.get(index).store(FREE, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Takes a member's hazard entry, idle.
    pub(crate) fn attach_member(&self) -> Result<usize, RingError> {
        self.cursors.take(IDLE).ok_or(RingError::TooManyReaders)
    }

    /// Moves `entry` to `start` under the claim lock: a registration, or a seek.
    pub(crate) fn place(
        &self,
        entry: &CachePadded<AtomicU64>,
        start: Start,
    ) -> Result<Attached, RingError> {
        let t = self.lock_tail();
        // Every offset from `oldest` on is whole or being written by the writer that
        // claimed it: the writers in flight overwrite offsets before `oldest`.
        let mut oldest = t.saturating_sub(self.capacity).max(self.base);
        if self.take {
            oldest = oldest.max(self.taken_to.load(Ordering::Acquire));
        }
        let asked = match start {
            Start::Earliest => oldest,
            Start::Latest => t,
            Start::Offset(o) => o,
        };
        if asked > t {
            self.unlock_tail();
            return Err(RingError::PastEnd { asked, end: t });
        }
        let pos = asked.max(oldest);
        entry.store(pos, Ordering::SeqCst);
        // `fetch_min`: a rescan under this lock could have raised the floor past `pos`.
        self.floor.fetch_min(pos, Ordering::SeqCst);
        self.unlock_tail();
        Ok(Attached {
            pos,
            missed: pos - asked,
        })
    }

    /// Lets go of a registry entry: its position no longer holds writers back.
    pub(crate) fn detach(&self, entry: &CachePadded<AtomicU64>) {
        entry.store(FREE, Ordering::Release);
        self.wake_writers_if_waiting();
    }

    /// Lets go of a reader's or a group's entry ([`Ring::detach`]), making room for
    /// another in a taking ring.
    pub(crate) fn detach_reader(&self, entry: &CachePadded<AtomicU64>) {
        if self.take {
            let pos = entry.load(Ordering::Acquire);
            if pos < IDLE {
                self.note_taken(pos & !(DETACHED | RESERVED));
            }
        }
        entry.store(FREE, Ordering::Release);
        if self.take {
            self.attached.store(0, Ordering::Release);
        }
        self.wake_writers_if_waiting();
    }

    /// Detaches a group's claim position `entry` while its members may live on (see
    /// [`Group::detach`](crate::Group::detach)): marks it [`DETACHED`], so that it no
    /// longer holds writers back and members' receives end, then wakes the writers and
    /// readers waiting (a woken member finds the group detached). The entry stays the
    /// group's until the group and its members are gone. Returns whether this call
    /// detached it (not an earlier one).
    pub(crate) fn detach_group(&self, entry: &CachePadded<AtomicU64>) -> bool {
        if entry.fetch_or(DETACHED, Ordering::SeqCst) & DETACHED != 0 {
            return false;
        }
        // The mark, then the flags and the wake position: the other half of a member's
        // flag set before its second look at the mark (`Member::prepare_wait`), and of a
        // writer's wake position before its rescan.
        self.wake_writers_if_waiting();
        if self.flags.load(Ordering::Relaxed) & READERS_WAIT != 0 {
            self.wake_readers(1);
        }
        true
    }

    /// In a taking ring: everything before `pos` was moved out.
    pub(crate) fn note_taken(&self, pos: u64) {
        if self.take && pos < IDLE {
            self.taken_to.fetch_max(pos, Ordering::AcqRel);
        }
    }

    #[inline]
    pub(crate) fn cursor(&self, index: usize) -> &CachePadded<AtomicU64> {
        self.cursors.get(index)
    }

    #[inline]
    pub(crate) fn claim_entry(&self, index: usize) -> &CachePadded<AtomicU64> {
        self.claims.get(index)
    }

    // ----- reading -----------------------------------------------------------------

    /// What is at `pos` for a reader whose position holds writers back from it.
    #[inline]
    pub(crate) fn read_at(&self, pos: u64) -> SlotState<T>
    where
        T: Clone,
    {
        let slot = self.slot(pos);
        let s = slot.seq.load(Ordering::Acquire);
        if s == pos + 1 && self.take {
            let value = slot.value.with_mut(|p| {
                // SAFETY: as below, the cell holds offset `pos`'s value and no writer
                // touches it while this reader's position (or hazard, or pin) is at most
                // `pos`;
                // in a taking ring this reader is the only one that reads `pos` (the one
                // reader attached, or the member whose claim of `pos` succeeded), so it may
                // move the value out; the mark below tells the next writer it is gone.
                unsafe {
                    debug_assert_eq!(slot.seq.load(Ordering::Relaxed), pos + 1);
                    (*p).assume_init_read()
                }
            });
            slot.seq.store(s | TAKEN, Ordering::Release);
            SlotState::Ready(value)
        } else if s == pos + 1 {
            let value = slot.value.with(|p| {
                // SAFETY: the stamp `pos + 1`, seen with Acquire, was stored (Release) after
                // the value was written, so the cell holds offset `pos`'s value; it stays
                // there while this reader's position (or hazard) is at most `pos`, since no
                // claim passes `floor + capacity` and the floor is at most that position,
                // or, in a ring that drops the oldest, while the reader pins `pos` having
                // seen no claim of the offset that overwrites it (see `Ring::write`).
                // Readers only take shared references.
                unsafe { (*p).assume_init_ref().clone() }
            });
            debug_assert_eq!(
                slot.seq.load(Ordering::Relaxed),
                pos + 1,
                "offset {pos} was overwritten while a reader held it back"
            );
            SlotState::Ready(value)
        } else if s & !SLOT_MARKS < pos + 1 {
            SlotState::Empty
        } else {
            SlotState::Gone
        }
    }

    /// Runs `f` on the value at `pos` if it is published (`None` if not), without
    /// cloning it: for a member that reserved `pos` and asks whether to take it.
    pub(crate) fn peek<R>(&self, pos: u64, f: impl FnOnce(&T) -> R) -> Option<R> {
        let slot = self.slot(pos);
        if slot.seq.load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        Some(slot.value.with(|p| {
            // SAFETY: as for `read_at`'s shared read: the stamp `pos + 1`, seen with
            // Acquire, was stored after the value was written, and the caller's hazard (or
            // pin) keeps writers off `pos`; in a taking ring the caller's reservation of
            // `pos` keeps every other member from moving the value out. The reference
            // lives only as long as this call of `f`.
            unsafe {
                debug_assert_eq!(slot.seq.load(Ordering::Relaxed), pos + 1);
                f((*p).assume_init_ref())
            }
        }))
    }

    /// In a ring that drops the oldest: pins `pos` in `entry` and returns where a reader
    /// at `pos` must move if writers have claimed the offset that overwrites it. With
    /// `None` the caller may read `pos`: no writer overwrites it before the entry says
    /// something else.
    #[inline]
    pub(crate) fn pin(&self, entry: &AtomicU64, pos: u64) -> Option<u64> {
        entry.store(pos | PIN, Ordering::SeqCst);
        // The other half of a writer's claim and its look at the pins (`look_for_pins`).
        crate::sync::loom_sc_fence();
        self.overtaken(pos)
    }

    /// In a ring that drops the oldest: where a reader (or a group) at `pos` moves if
    /// writers have claimed past `pos + capacity`, the oldest message then held.
    #[inline]
    pub(crate) fn overtaken(&self, pos: u64) -> Option<u64> {
        let t = self.tail.load(Ordering::SeqCst) & !MARKS;
        (t > pos + self.capacity).then(|| t - self.capacity)
    }

    /// Whether offset `pos` is stamped (for a reader's second look before it sleeps).
    #[inline]
    pub(crate) fn is_ready(&self, pos: u64) -> bool {
        self.slot(pos).seq.load(Ordering::SeqCst) & !SLOT_MARKS > pos
    }

    /// Whether a reader at `pos` has nothing more to read, ever: the ring is closed and
    /// nothing was claimed at `pos` or after.
    #[inline]
    pub(crate) fn finished_at(&self, pos: u64) -> bool {
        let t = self.tail.load(Ordering::Acquire);
        t & CLOSED != 0 && pos >= t & !MARKS
    }

    /// Called by a reader whose position moved forwards to `pos`: stores it in `entry`,
    /// then wakes the writers waiting for room if `pos` reached their wake position and
    /// the floor did too (see [`Ring::wake_writers_if_room`]).
    ///
    /// Every message, not every few: readers that stop where a waiting writer's room is
    /// free (their users busy, or gone to another partition) must not leave it waiting.
    /// A store, then a fence, then a load: no read-modify-write on a reader's path. The
    /// fence pairs with the one in [`Ring::prepare_batch_publisher_wait`] (Dekker's
    /// pattern): either the writer's rescan sees this position, or this reader sees the
    /// writer's wake position.
    ///
    /// A reader scans the positions once per wake position and wake-up count
    /// (`scanned`), not on every message past it: a scan that finds the floor behind the
    /// wake position found a holder there, and that holder looks when it moves: a reader
    /// when it crosses the wake position (the last to cross sees every other one's
    /// position, in the fences' order), a group's claim whenever a member moves it
    /// ([`Ring::member_moved`]), a member's hazard whenever it is cleared
    /// ([`Ring::hazard_cleared`]), a hold whenever it moves (it wakes waiting writers
    /// whatever their position, or its front does after `advance_quietly`). A reader
    /// that seeks forgets its scan. Scanning again on every message while the slowest
    /// caught up spent a fifth of a fan-out's time reading the other readers' cache
    /// lines (docs/ENGINE-PLAN.md, S3 on the ring). A lower wake position, or one set
    /// again after a wake-up, is scanned for anew: a stale one that every reader has
    /// passed (left by a writer that announced and then found room) is met by the next
    /// move.
    #[inline]
    pub(crate) fn reader_moved(&self, entry: &AtomicU64, pos: u64, scanned: &mut Scanned) {
        entry.store(pos, Ordering::Release);
        fence(Ordering::SeqCst);
        // Acquire: a wake position announced after a wake-up comes with its count (the
        // writer's `fetch_min` read the clear, which came after the bump).
        let at = self.wake_at.load(Ordering::Acquire);
        if at != NOBODY && pos >= at {
            let now = Scanned {
                at,
                wakes: self.wakes.load(Ordering::Relaxed),
            };
            if *scanned != now {
                *scanned = now;
                self.wake_writers_if_room(at);
            }
        }
    }

    /// [`Ring::reader_moved`] for a group member whose receive ended: clears its hazard,
    /// fences, and compares the group's position (`claim`) with the writers' wake
    /// position. The group's position, not the member's own: another member may have
    /// moved it past the wake position while this member's hazard still held the floor
    /// back.
    ///
    /// Then it passes a wake-up on: if the readers' flag is set (a front that wakes
    /// members one at a time left some waiting, see [`Waiters`]) and the group has more
    /// messages, it wakes readers again. A writer that published while the flag was
    /// clear woke nobody; its claim and fence come before the flag was set again, so
    /// this member, woken after that and past its own fence, sees the claim.
    #[inline]
    pub(crate) fn member_moved(&self, hazard: &AtomicU64, claim: &AtomicU64) {
        self.clear_hazard(hazard, claim);
        if self.flags.load(Ordering::Relaxed) & READERS_WAIT != 0
            && claim.load(Ordering::Acquire) & !RESERVED < self.end()
        {
            self.wake_readers(1);
        }
    }

    /// Clears a member's hazard, fences, and wakes the writers if the group's position
    /// (`claim`) is at their wake position and the floor is too: for a receive that
    /// claimed ([`Ring::member_moved`]) and, through [`Ring::hazard_cleared`], for one
    /// that ends without a claim (nothing published, closed, declined, a panicking
    /// clone). The hazard may have been the last thing below the writers' wake position:
    /// readers past that position scan for it once, and another member's claim that
    /// moved the group past it looked while the hazard still held the floor. The loom
    /// model `a_member_that_ends_without_a_claim_wakes_a_writer_its_hazard_held_back`
    /// found a writer parked for ever when a receive without a claim did not look.
    #[inline]
    fn clear_hazard(&self, hazard: &AtomicU64, claim: &AtomicU64) {
        hazard.store(IDLE, Ordering::Release);
        fence(Ordering::SeqCst);
        let at = self.wake_at.load(Ordering::Relaxed);
        if at != NOBODY && claim.load(Ordering::Acquire) & !RESERVED >= at {
            self.wake_writers_if_room(at);
        }
    }

    /// [`Ring::clear_hazard`] for a receive ending, unless the hazard is clear already
    /// (a receive that claimed cleared it in [`Ring::member_moved`]): the test is
    /// inline, the clearing out of line, as a receive ends without a claim only when
    /// it finds nothing, is closed or declines.
    #[inline]
    pub(crate) fn hazard_cleared(&self, hazard: &AtomicU64, claim: &AtomicU64) {
        if hazard.load(Ordering::Relaxed) != IDLE {
            self.clear_hazard_cold(hazard, claim);
        }
    }

    #[cold]
    #[inline(never)]
    fn clear_hazard_cold(&self, hazard: &AtomicU64, claim: &AtomicU64) {
        self.clear_hazard(hazard, claim);
    }

    /// For a member that found the ring closed, or declined a message: passes on a
    /// wake-up a front that wakes members one at a time gave it (a close woke one, and
    /// no publish will follow to wake the others; a declined message is another's).
    #[cold]
    pub(crate) fn pass_wake_on(&self) {
        fence(Ordering::SeqCst);
        if self.flags.load(Ordering::Relaxed) & READERS_WAIT != 0 {
            self.wake_readers(1);
        }
    }

    /// For a reader (or member) past the wake position `at`: wakes the waiting writers
    /// if the floor reached `at` too, that is if no other reader, group or hazard holds
    /// them back (one that does wakes them when it gets there). A scan of the positions
    /// without the claim lock, after the caller's fence: of two readers that reach `at`
    /// together, one sees the other's position (each stored its own, fenced, then
    /// scans), so at least one wakes the writers. A registration it misses only makes
    /// the wake-up early: the writers rescan under the claim lock and wait again.
    ///
    /// `at` may be lower than what the waiting writers need (a writer that announced
    /// and then found room, or one that worked its need out from an older `end`): then
    /// they are woken early and announce again. A reader remembers only its last scan
    /// and the wake-up count with it ([`Scanned`]), so such a value, once lowered again
    /// or set again after a wake-up, is scanned for anew, and never hides the wake-up a
    /// writer does need.
    #[cold]
    #[inline(never)]
    fn wake_writers_if_room(&self, at: u64) {
        if self.min_position().is_none_or(|floor| floor >= at) {
            self.wake_writers();
        }
    }

    /// Wakes writers waiting for room, if any wait: for readers and holds that moved
    /// or left, whatever their position. Public for a front that moved a hold with
    /// [`Hold::advance_quietly`](crate::Hold::advance_quietly) under a lock of its own:
    /// it calls this once it has let go of the lock.
    #[inline]
    pub fn wake_writers_if_waiting(&self) {
        // Orders the position's store before the wake position's load, against a
        // writer's store of it before its rescan (Dekker's pattern).
        fence(Ordering::SeqCst);
        if self.wake_at.load(Ordering::Relaxed) != NOBODY {
            self.wake_writers();
        }
    }

    /// A reader about to wait for `pos`: sets the readers' flag, then looks again.
    /// Returns whether it may sleep (nothing arrived in between).
    pub(crate) fn reader_may_sleep(&self, pos: u64) -> bool {
        self.wake_writers_if_waiting();
        self.flags.fetch_or(READERS_WAIT, Ordering::SeqCst);
        // The other half of the writer's fence after its stamp (`after_write`), and of
        // `close`'s.
        fence(Ordering::SeqCst);
        !self.is_ready(pos) && !self.finished_at(pos)
    }

    /// For a front that parks writers: announces that a writer is about to wait for
    /// room (a reader that moves on calls [`Waiters::wake_writers`]), then looks again.
    /// Returns whether it may sleep: there is still no room and the ring is open. The
    /// front registers the writer with its waiters before calling this.
    ///
    /// A writer that waits is woken once `capacity / 16` slots (1 to 64) are free, not
    /// at the first one, as memq's `Block` topics: a writer faster than its readers
    /// waits once per batch. Readers that stop reading with fewer slots freed (a close,
    /// a reader leaving or seeking, and a reader about to wait wake writers whatever the
    /// room) leave it waiting until they read on.
    pub fn prepare_publisher_wait(&self) -> bool {
        self.prepare_batch_publisher_wait(1)
    }

    /// [`Ring::prepare_publisher_wait`] for a writer of a batch of `n` messages, which
    /// waits until there is room for all of them.
    pub fn prepare_batch_publisher_wait(&self, n: usize) -> bool {
        // The floor must reach `need` for `n` more messages to fit after `end`, or
        // `wake_batch` of them, as memq's topics do: a writer faster than its readers
        // is woken once per batch of free slots, not once per slot. A later `end` only
        // asks for more, so a stale one wakes this writer early, never late.
        let need = self
            .end()
            .saturating_add((n as u64).max(self.wake_batch))
            .saturating_sub(self.capacity);
        self.wake_at.fetch_min(need, Ordering::SeqCst);
        // The other half of the reader's fence after its position
        // (`wake_writers_if_waiting`).
        fence(Ordering::SeqCst);
        !self.has_room_for(n as u64)
    }
}

impl<T> Ring<T, NoWaiters> {
    /// An empty ring of `config.capacity` messages whose users never wait.
    pub fn new(config: RingConfig) -> Result<Self, RingError> {
        Self::with_waiters(config, NoWaiters)
    }
}

/// What a claim found.
enum Claim {
    Offset(u64),
    Full,
    Closed,
}

/// What a reader found at its position.
#[derive(Debug)]
pub(crate) enum SlotState<T> {
    Ready(T),
    /// Not written yet.
    Empty,
    /// Overwritten: the reader was overtaken.
    Gone,
}

impl<T, W> Drop for Ring<T, W> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let s = slot.seq.load(Ordering::Relaxed);
            if s != 0 && s & TAKEN == 0 {
                slot.value.with_mut(|p| {
                    // SAFETY: a slot stamped non-zero and not marked taken holds its last
                    // lap's value (each write replaces the previous one, moved out), and
                    // with `&mut self` no reader or writer is left.
                    unsafe {
                        debug_assert_eq!(s & MOVING, 0, "a move left unfinished");
                        (*p).assume_init_drop()
                    }
                });
            }
        }
    }
}
