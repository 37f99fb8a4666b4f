#if Server
import NIOCore
import NIOHTTP1

typealias ClientParts = NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator
#endif
