"""TLV-TYPE numbers of the NDN packet format v0.3 and NDNLPv2 (one place, used everywhere)."""

# Packets
INTEREST = 5
DATA = 6
LP_PACKET = 100

# Name and components
NAME = 7
COMP_IMPLICIT_DIGEST = 1
COMP_PARAMS_DIGEST = 2
COMP_GENERIC = 8
COMP_KEYWORD = 32
COMP_SEGMENT = 50
COMP_BYTE_OFFSET = 52
COMP_VERSION = 54
COMP_TIMESTAMP = 56
COMP_SEQUENCE_NUM = 58
# Reflexive Name Segment: the draft leaves the NDN type "TBD"; 59 is what the reflexive NFD demo
# used, sits next to the naming-convention types and is unassigned in the registry.
COMP_REFLEXIVE = 59

# Interest
CAN_BE_PREFIX = 33
MUST_BE_FRESH = 18
FORWARDING_HINT = 30
NONCE = 10
INTEREST_LIFETIME = 12
HOP_LIMIT = 34
APPLICATION_PARAMETERS = 36
INTEREST_SIGNATURE_INFO = 44
INTEREST_SIGNATURE_VALUE = 46

# Data
META_INFO = 20
CONTENT = 21
SIGNATURE_INFO = 22
SIGNATURE_VALUE = 23
CONTENT_TYPE = 24
FRESHNESS_PERIOD = 25
FINAL_BLOCK_ID = 26
SIGNATURE_TYPE = 27
KEY_LOCATOR = 28
KEY_DIGEST = 29
SIGNATURE_NONCE = 38
SIGNATURE_TIME = 40
SIGNATURE_SEQ_NUM = 42

# Signature types
SIG_DIGEST_SHA256 = 0
SIG_SHA256_WITH_RSA = 1
SIG_SHA256_WITH_ECDSA = 3
SIG_HMAC_WITH_SHA256 = 4
SIG_ED25519 = 5
# NDN's NullSignature (python-ndn's SignatureType.NULL): an empty SignatureValue, for packets
# whose integrity the links already check and that no one verifies (e.g. gradient chunks)
SIG_NULL = 200

# Content types
CONTENT_BLOB = 0
CONTENT_LINK = 1
CONTENT_KEY = 2
CONTENT_NACK = 3

# NDNLPv2 header fields
LP_FRAGMENT = 80
LP_SEQUENCE = 81
LP_FRAG_INDEX = 82
LP_FRAG_COUNT = 83
LP_PIT_TOKEN = 98
LP_NACK = 800
LP_NACK_REASON = 801
LP_INCOMING_FACE_ID = 812
LP_NEXT_HOP_FACE_ID = 816
LP_CACHE_POLICY = 820
LP_CACHE_POLICY_TYPE = 821
LP_CONGESTION_MARK = 832
LP_ACK = 836
LP_TX_SEQUENCE = 840
LP_NON_DISCOVERY = 844
LP_PREFIX_ANNOUNCEMENT = 848

# Nack reasons
NACK_NONE = 0
NACK_CONGESTION = 50
NACK_DUPLICATE = 100
NACK_NO_ROUTE = 150

CACHE_POLICY_NO_CACHE = 1

# Largest packet a forwarder accepts on a network face, UDP or TCP (NFD's MAX_NDN_PACKET_SIZE).
MAX_PACKET_SIZE = 8800
# Largest packet on a local face (Unix socket, in-memory): apps on the forwarder's host send
# collective gradient chunks of up to 1 MiB as single Data, which the per-packet cost of 8800-byte
# segments would make several times slower.  Such packets never leave the host: a network face
# drops (and counts) what exceeds MAX_PACKET_SIZE.
MAX_LOCAL_PACKET_SIZE = 4 << 20
# Room a stream frame may add around a packet for its NDNLPv2 header (PitToken, Nack, ...).
LP_HEADER_ROOM = 256
DEFAULT_INTEREST_LIFETIME_MS = 4000
