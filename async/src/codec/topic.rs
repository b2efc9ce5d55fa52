//! Typed helpers over byte topics: encode-then-publish on `Topic<Bytes>`, decode on
//! `Message<Bytes>`. They use only the topic's public publishing methods and the message's
//! `value()`, and add no state of their own.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use memq_core::{Message, Publish, PublishError, Receipt, Topic};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Codec, CodecError};

mod sealed {
    /// Keeps the extension traits implemented for byte topics and messages only, so that
    /// methods can be added to them without breaking anyone.
    pub trait Sealed {}

    impl Sealed for memq_core::Topic<bytes::Bytes> {}
    impl Sealed for memq_core::Message<bytes::Bytes> {}
}

/// Encoding publishers for byte topics: `topic.publish_encoded(&codec, &value)`.
///
/// The value is encoded when the method is called, before anything is published, so an
/// encoding error publishes nothing and the returned future borrows only the topic.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "json")]
/// # {
/// use bytes::Bytes;
/// use memq::codec::{Json, MessageCodecExt, TopicCodecExt};
/// use memq::{StartAt, Topic, TopicConfig};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Order {
///     id: u64,
///     item: String,
/// }
///
/// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(16))?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
///
/// let order = Order { id: 1, item: "tea".into() };
/// topic.try_publish_encoded(&Json::new(), &order)?;
///
/// let msg = sub.try_recv()?;
/// assert_eq!(msg.decode::<Order, _>(&Json::new())?, order);
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait TopicCodecExt: sealed::Sealed {
    /// Encodes `value` with `codec` and publishes it, waiting for room as
    /// [`Topic::publish`] does.
    ///
    /// # Errors
    ///
    /// [`EncodedPublishError::Codec`] if `value` does not encode (nothing is published);
    /// [`EncodedPublishError::Publish`] with the encoded bytes if the topic refuses them
    /// (closed, or full under a rejecting overflow policy).
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish`]: dropping the future before it completes publishes nothing, and
    /// the encoded bytes are dropped with it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{Json, TopicCodecExt};
    /// use memq::Topic;
    ///
    /// async fn report(topic: &Topic<Bytes>, celsius: f32) -> Result<u64, Box<dyn std::error::Error>> {
    ///     let receipt = topic.publish_encoded(&Json::new(), &celsius).await?;
    ///     Ok(receipt.offset)
    /// }
    /// # let _ = report;
    /// # }
    /// ```
    fn publish_encoded<C, T>(&self, codec: &C, value: &T) -> PublishEncoded<'_>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized;

    /// Encodes `value` with `codec` and publishes it if the topic has room now, as
    /// [`Topic::try_publish`] does.
    ///
    /// # Errors
    ///
    /// [`EncodedPublishError::Codec`] if `value` does not encode (nothing is published);
    /// [`EncodedPublishError::Publish`] with the encoded bytes if the topic is full or closed.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{EncodedPublishError, Json, TopicCodecExt};
    /// use memq::{Topic, TopicConfig};
    ///
    /// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
    /// let receipt = topic.try_publish_encoded(&Json::new(), &[1, 2, 3])?;
    /// assert_eq!(receipt.offset, 0);
    ///
    /// topic.close();
    /// let err = topic.try_publish_encoded(&Json::new(), &[4]).unwrap_err();
    /// assert!(matches!(err, EncodedPublishError::Publish(_)));
    /// assert_eq!(err.into_inner().as_deref(), Some(&b"[4]"[..]));
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_publish_encoded<C, T>(
        &self,
        codec: &C,
        value: &T,
    ) -> Result<Receipt, EncodedPublishError>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized;

    /// Encodes `value` with `codec` and publishes it, blocking the thread while the topic is
    /// full, as [`Topic::publish_blocking`] does (feature `std`). Never call it from async code.
    ///
    /// # Errors
    ///
    /// As [`publish_encoded`](TopicCodecExt::publish_encoded).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{Json, TopicCodecExt};
    /// use memq::{Topic, TopicConfig};
    ///
    /// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
    /// let worker = {
    ///     let topic = topic.clone();
    ///     std::thread::spawn(move || topic.publish_encoded_blocking(&Json::new(), "done"))
    /// };
    /// assert_eq!(worker.join().unwrap()?.offset, 0);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    fn publish_encoded_blocking<C, T>(
        &self,
        codec: &C,
        value: &T,
    ) -> Result<Receipt, EncodedPublishError>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized;
}

impl TopicCodecExt for Topic<Bytes> {
    fn publish_encoded<C, T>(&self, codec: &C, value: &T) -> PublishEncoded<'_>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized,
    {
        let state = match encode(codec, value) {
            Ok(bytes) => State::Publishing(self.publish(bytes)),
            Err(err) => State::Failed(Some(err)),
        };
        PublishEncoded { state }
    }

    fn try_publish_encoded<C, T>(
        &self,
        codec: &C,
        value: &T,
    ) -> Result<Receipt, EncodedPublishError>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized,
    {
        let bytes = encode(codec, value)?;
        Ok(self.try_publish(bytes)?)
    }

    #[cfg(feature = "std")]
    fn publish_encoded_blocking<C, T>(
        &self,
        codec: &C,
        value: &T,
    ) -> Result<Receipt, EncodedPublishError>
    where
        C: Codec + ?Sized,
        T: Serialize + ?Sized,
    {
        let bytes = encode(codec, value)?;
        Ok(self.publish_blocking(bytes)?)
    }
}

/// Encodes straight into the buffer that becomes the message: `Bytes::from(Vec)` takes it
/// over without copying.
fn encode<C, T>(codec: &C, value: &T) -> Result<Bytes, CodecError>
where
    C: Codec + ?Sized,
    T: Serialize + ?Sized,
{
    codec.encode(value).map(Bytes::from)
}

/// The future returned by [`TopicCodecExt::publish_encoded`].
///
/// Resolves to the publish [`Receipt`], or to an [`EncodedPublishError`].
///
/// # Cancel safety
///
/// Dropping it before it completes publishes nothing.
///
/// # Panics
///
/// Polling it again after it returned `Poll::Ready` panics, as for most futures.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct PublishEncoded<'a> {
    state: State<'a>,
}

enum State<'a> {
    /// Encoding failed; the error is taken when the future is first polled.
    Failed(Option<CodecError>),
    /// Encoded; waiting on the topic.
    Publishing(Publish<'a, Bytes>),
    /// Completed.
    Done,
}

impl Future for PublishEncoded<'_> {
    type Output = Result<Receipt, EncodedPublishError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The topic's `Publish` future is `Unpin`, so no projection is needed.
        let this = self.get_mut();
        let output = match &mut this.state {
            State::Failed(err) => match err.take() {
                Some(err) => Err(EncodedPublishError::Codec(err)),
                None => panic!("`PublishEncoded` polled after completion"),
            },
            State::Publishing(publish) => match Pin::new(publish).poll(cx) {
                Poll::Ready(result) => result.map_err(EncodedPublishError::Publish),
                Poll::Pending => return Poll::Pending,
            },
            State::Done => panic!("`PublishEncoded` polled after completion"),
        };
        this.state = State::Done;
        Poll::Ready(output)
    }
}

impl fmt::Debug for PublishEncoded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Failed(_) => "failed",
            State::Publishing(_) => "publishing",
            State::Done => "done",
        };
        f.debug_struct("PublishEncoded")
            .field("state", &state)
            .finish()
    }
}

/// Why an encoded publish failed: the value did not encode, or the topic refused the bytes.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "json")]
/// # {
/// use std::collections::BTreeMap;
///
/// use bytes::Bytes;
/// use memq::codec::{EncodedPublishError, Json, TopicCodecExt};
/// use memq::{Topic, TopicConfig};
///
/// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
/// // JSON object keys must be strings.
/// let bad = BTreeMap::from([((1, 2), "pair key")]);
/// match topic.try_publish_encoded(&Json::new(), &bad) {
///     Err(EncodedPublishError::Codec(err)) => println!("not sent: {err}"),
///     other => panic!("expected an encoding error, got {other:?}"),
/// }
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum EncodedPublishError {
    /// The value did not encode; nothing was published.
    Codec(CodecError),
    /// The value encoded, but the topic refused it; the error hands the bytes back.
    Publish(PublishError<Bytes>),
}

impl EncodedPublishError {
    /// The encoded message the topic refused, to retry or log; `None` if encoding failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{Json, TopicCodecExt};
    /// use memq::{Topic, TopicConfig};
    ///
    /// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
    /// topic.close();
    /// let err = topic.try_publish_encoded(&Json::new(), &true).unwrap_err();
    /// assert_eq!(err.into_inner(), Some(Bytes::from_static(b"true")));
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_inner(self) -> Option<Bytes> {
        match self {
            EncodedPublishError::Codec(_) => None,
            EncodedPublishError::Publish(err) => Some(err.into_inner()),
        }
    }
}

impl fmt::Display for EncodedPublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodedPublishError::Codec(err) => write!(f, "message not published: {err}"),
            EncodedPublishError::Publish(err) => {
                write!(f, "encoded message not published: {err}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EncodedPublishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EncodedPublishError::Codec(err) => Some(err),
            EncodedPublishError::Publish(err) => Some(err),
        }
    }
}

impl From<CodecError> for EncodedPublishError {
    fn from(err: CodecError) -> Self {
        EncodedPublishError::Codec(err)
    }
}

impl From<PublishError<Bytes>> for EncodedPublishError {
    fn from(err: PublishError<Bytes>) -> Self {
        EncodedPublishError::Publish(err)
    }
}

/// Decoding for messages of byte topics: `msg.decode::<T, _>(&codec)`, `msg.decode_any::<T>()`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "msgpack")]
/// # {
/// use bytes::Bytes;
/// use memq::codec::{CodecExt, MessageCodecExt, MsgPack, TopicCodecExt};
/// use memq::{StartAt, Topic, TopicConfig};
///
/// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// topic.try_publish_encoded(&MsgPack::new().with_header(), &("temp", 21))?;
///
/// let msg = sub.try_recv()?;
/// let (name, value): (String, i32) = msg.decode_any()?;
/// assert_eq!((name.as_str(), value), ("temp", 21));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait MessageCodecExt: sealed::Sealed {
    /// Decodes the message's value with `codec`. The value is borrowed, not cloned.
    ///
    /// # Errors
    ///
    /// Whatever [`Codec::decode`] returns for these bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{Json, MessageCodecExt};
    /// use memq::{Message, StartAt, Topic, TopicConfig};
    ///
    /// fn total(msg: &Message<Bytes>) -> Result<u32, memq::codec::CodecError> {
    ///     let amounts: Vec<u32> = msg.decode(&Json::new())?;
    ///     Ok(amounts.iter().sum())
    /// }
    ///
    /// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
    /// let mut sub = topic.subscribe(StartAt::Earliest)?;
    /// topic.try_publish(Bytes::from_static(b"[1,2,3]"))?;
    /// assert_eq!(total(&sub.try_recv()?)?, 6);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn decode<T, C>(&self, codec: &C) -> Result<T, CodecError>
    where
        T: DeserializeOwned,
        C: Codec + ?Sized;

    /// Decodes a message written by any [`Framed`](super::Framed) codec, as
    /// [`decode_any`](super::decode_any) does.
    ///
    /// # Errors
    ///
    /// As [`decode_any`](super::decode_any).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "std")]
    /// # {
    /// use bytes::Bytes;
    /// use memq::codec::{CodecError, MessageCodecExt};
    /// use memq::{StartAt, Topic, TopicConfig};
    ///
    /// let topic: Topic<Bytes> = Topic::new(TopicConfig::new(4))?;
    /// let mut sub = topic.subscribe(StartAt::Earliest)?;
    /// topic.try_publish(Bytes::from_static(b"no header here"))?;
    /// let msg = sub.try_recv()?;
    /// assert_eq!(msg.decode_any::<String>(), Err(CodecError::BadMagic));
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn decode_any<T>(&self) -> Result<T, CodecError>
    where
        T: DeserializeOwned;
}

impl MessageCodecExt for Message<Bytes> {
    fn decode<T, C>(&self, codec: &C) -> Result<T, CodecError>
    where
        T: DeserializeOwned,
        C: Codec + ?Sized,
    {
        codec.decode(self.value())
    }

    fn decode_any<T>(&self) -> Result<T, CodecError>
    where
        T: DeserializeOwned,
    {
        super::decode_any(self.value())
    }
}
