//! The broker: a registry of named topics of one value type.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::config::TopicConfig;
use crate::error::Error;
use crate::stats::TopicStats;
use crate::sync::Mutex;
use crate::topic::Topic;

/// Named topics, created and found by name.
///
/// The broker holds a handle to each topic, so a registered topic lives on when every
/// other handle is dropped; [`Broker::delete`] unregisters and closes it (readers drain,
/// then get `Closed`). Closing it through any handle ([`Topic::close`]) closes it for
/// everyone but leaves it registered: [`Broker::get`] returns it closed, and its name is
/// taken until it is deleted. The broker spawns nothing and needs no runtime.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{Broker, StartAt, TopicConfig};
///
/// let broker = Broker::<u64>::new();
/// let orders = broker.create("orders", TopicConfig::new(128))?;
/// let mut audit = broker.get("orders")?.subscribe(StartAt::Earliest)?;
/// orders.try_publish(42)?;
/// assert_eq!(audit.try_recv()?.into_value(), 42);
/// assert_eq!(broker.list(), ["orders"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Broker<T> {
    topics: Mutex<BTreeMap<String, Topic<T>>>,
}

impl<T> fmt::Debug for Broker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("topics", &self.list())
            .finish()
    }
}

impl<T> Default for Broker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Broker<T> {
    /// An empty broker.
    pub fn new() -> Self {
        Self {
            topics: Mutex::new(BTreeMap::new()),
        }
    }

    /// Creates the topic `name`.
    ///
    /// # Errors
    ///
    /// [`Error::TopicExists`] if the name is taken; configuration errors as
    /// [`Topic::new`].
    pub fn create(&self, name: &str, config: TopicConfig) -> Result<Topic<T>, Error> {
        if self.contains(name) {
            return Err(Error::TopicExists(name.into()));
        }
        // Built (and a bad config dropped) outside the registry lock: building reads the
        // user's clock.
        let topic = Topic::build(Some(name.into()), config)?;
        let mut topics = self.topics.lock();
        if topics.contains_key(name) {
            // Made meanwhile by another caller; this one goes after the lock.
            drop(topics);
            drop(topic);
            return Err(Error::TopicExists(name.into()));
        }
        topics.insert(name.into(), topic.clone());
        Ok(topic)
    }

    /// The topic `name`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownTopic`] if there is none.
    pub fn get(&self, name: &str) -> Result<Topic<T>, Error> {
        self.topics
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTopic(name.into()))
    }

    /// The topic `name`, created with `config` if it does not exist (an existing topic
    /// keeps its own configuration).
    ///
    /// # Errors
    ///
    /// Configuration errors as [`Topic::new`], only when the topic is created.
    pub fn get_or_create(&self, name: &str, config: TopicConfig) -> Result<Topic<T>, Error> {
        let existing = self.topics.lock().get(name).cloned();
        if let Some(t) = existing {
            return Ok(t);
        }
        // Built outside the registry lock, as in `create`.
        let topic = Topic::build(Some(name.into()), config)?;
        let mut topics = self.topics.lock();
        if let Some(t) = topics.get(name) {
            // Made meanwhile by another caller: that one is the topic.
            let t = t.clone();
            drop(topics);
            drop(topic);
            return Ok(t);
        }
        topics.insert(name.into(), topic.clone());
        Ok(topic)
    }

    /// Unregisters and closes the topic `name`. Tasks waiting on it are woken: readers
    /// drain what is retained and then get `Closed`, publishers get `Closed`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownTopic`] if there is none.
    pub fn delete(&self, name: &str) -> Result<(), Error> {
        let topic = self
            .topics
            .lock()
            .remove(name)
            .ok_or_else(|| Error::UnknownTopic(name.into()))?;
        // Closed and dropped outside the registry lock.
        topic.close();
        Ok(())
    }

    /// Whether a topic `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.topics.lock().contains_key(name)
    }

    /// The names of all topics, sorted.
    pub fn list(&self) -> Vec<String> {
        self.topics.lock().keys().cloned().collect()
    }

    /// How many topics exist.
    pub fn len(&self) -> usize {
        self.topics.lock().len()
    }

    /// Whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stats of every topic, sorted by name. Each topic is read on its own, after the
    /// registry lock is released.
    pub fn stats(&self) -> Vec<TopicStats> {
        let topics: Vec<Topic<T>> = self.topics.lock().values().cloned().collect();
        topics.iter().map(Topic::stats).collect()
    }
}
