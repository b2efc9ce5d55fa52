//! The topic's reader entry points: subscribing, joining, listing and deleting groups,
//! and an explicit-ack group's dead-letter topic. The readers themselves live below, in
//! [`read`](crate::read) and [`ack`](crate::ack); these are the public methods that make
//! them from a [`Topic`].
//!
//! Layer: the facade, on top of the readers.

use alloc::string::String;
use alloc::vec::Vec;

use super::Topic;
use crate::ack::{AckConfig, AckConsumer, DeadLetter, DeadLetterSink, SinkError};
use crate::config::StartAt;
use crate::error::{Error, PublishError};
use crate::read::group::{self, Consumer};
use crate::read::subscriber::Subscriber;

impl<T> Topic<T> {
    /// Subscribes to every partition, starting at `start`.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] if `start` is an offset past the end of a partition.
    pub fn subscribe(&self, start: StartAt) -> Result<Subscriber<T>, Error> {
        Subscriber::attach(&self.shared, (0..self.shared.parts.len()).collect(), start)
    }

    /// Subscribes to one partition, starting at `start`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`] or [`Error::OffsetOutOfRange`].
    pub fn subscribe_partition(
        &self,
        partition: u32,
        start: StartAt,
    ) -> Result<Subscriber<T>, Error> {
        let p = self.shared.check_partition(partition)?;
        Subscriber::attach(&self.shared, alloc::vec![p], start)
    }
    /// Joins the consumer group `name`, creating it at `start` if it does not exist yet.
    /// An existing group keeps its committed position and `start` is ignored.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] if a new group would start past the end of a partition;
    /// [`Error::GroupModeMismatch`] if `name` is an explicit-ack group (joined with
    /// [`Topic::group_acked`](crate::Topic::group_acked)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut a = topic.group("workers", StartAt::Earliest)?;
    /// let mut b = topic.group("workers", StartAt::Earliest)?;
    /// topic.try_publish(1)?;
    /// topic.try_publish(2)?;
    /// let got = [a.try_recv()?.into_value(), b.try_recv()?.into_value()];
    /// assert_eq!(got, [1, 2]); // each message to exactly one member
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group(&self, name: &str, start: StartAt) -> Result<Consumer<T>, Error> {
        group::join(&self.shared, name, start, None)
    }

    /// Joins the explicit-ack group `name`, creating it with `config` at `start` if it does
    /// not exist (an existing group keeps its own settings and position).
    ///
    /// # Errors
    ///
    /// [`Error::GroupModeMismatch`] if `name` is an automatic-commit group;
    /// [`Error::ZeroInFlight`], [`Error::ZeroAckWait`] or [`Error::ZeroMaxDeliveries`]
    /// for a zero in `config`; [`Error::ClockRequired`] (without `std` and without a
    /// clock); or [`Error::OffsetOutOfRange`] for a start past the end.
    pub fn group_acked(
        &self,
        name: &str,
        start: StartAt,
        config: AckConfig<T>,
    ) -> Result<AckConsumer<T>, Error> {
        AckConsumer::join(&self.shared, name, start, config)
    }

    /// Deletes the group `name`: its position no longer holds back retention, and its
    /// members' receives return `Closed`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownGroup`] if there is no such group.
    pub fn delete_group(&self, name: &str) -> Result<(), Error> {
        group::delete(&self.shared, name)
    }

    /// Names of the groups on this topic.
    pub fn groups(&self) -> Vec<String> {
        group::names(&self.shared)
    }
}

impl<T> AckConfig<T> {
    /// The topic dead letters are published to.
    ///
    /// While it is full, a message bound there stays in the group (unacknowledged, not
    /// delivered again) and the move is retried every few milliseconds. Once it is
    /// closed, nothing more can go there: messages are delivered again instead, as if
    /// `max_deliveries` were not set, so that none is lost.
    ///
    /// The group keeps `topic`, a publishing handle, for as long as the group lives (until
    /// it is deleted and its last member and delivery are gone): dropping every other
    /// handle does not close the dead-letter topic, and its readers wait for more. Close
    /// it with [`Topic::close`] to end them; deleting the group may close it, when the
    /// group held its last handle.
    pub fn dead_letter(mut self, topic: Topic<DeadLetter<T>>) -> Self
    where
        T: Send + Sync + 'static,
    {
        self.dead_letter =
            Some(alloc::sync::Arc::new(topic)
                as alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>);
        self
    }
}

impl<T> DeadLetterSink<T> for Topic<DeadLetter<T>> {
    fn send(&self, letter: DeadLetter<T>) -> Result<(), (SinkError, DeadLetter<T>)> {
        match self.try_publish(letter) {
            Ok(_) => Ok(()),
            Err(PublishError::Closed(letter)) => Err((SinkError::Closed, letter)),
            Err(e) => Err((SinkError::Later, e.into_inner())),
        }
    }
}
