"""memoryd's Python SDK: the reference SDK's memory methods, plus sessions, the memory tool and the turn.

    from memoryd_sdk import MemorydServer

    with MemorydServer("http://127.0.0.1:8080", token="...") as server:
        server.save_memory("deploy_steps", "we deploy with buildkite", description="how we deploy")
        for memory in server.search_memories("deploy").memories:
            print(memory.name, memory["description"])
"""

from memoryd_sdk._async import AsyncMemorydConsole, AsyncMemorydServer, AsyncSession
from memoryd_sdk._sync import MemorydConsole, MemorydServer, Session
from memoryd_sdk.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    DatabaseUnavailableError,
    MemorydAPIError,
    MemorydError,
    NotCaughtUpError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestInProgressError,
    RequestTooLargeError,
    ServerError,
)
from memoryd_sdk.models import (
    AdminMemoryInfo,
    AuditRecord,
    ChainPage,
    ClosedSessions,
    CreatedToken,
    ErasureCertificate,
    ErasureCheck,
    ErasurePreview,
    ListMemoriesResponse,
    LoggedEvent,
    MemoryInfo,
    MemoryWrite,
    Nudge,
    ProjectInfo,
    ProjectPage,
    Receipt,
    ReceiptList,
    ReceiptPage,
    SessionInfo,
    SessionPage,
    SessionRecord,
    StatusResponse,
    TokenInfo,
    TokenPage,
    ToolResult,
    TurnContext,
    TurnItem,
    UserInfo,
    UserPage,
    WorkstreamInfo,
    WorkstreamPage,
    WriteResult,
)

__all__ = [
    "APIConnectionError", "APITimeoutError", "AdminMemoryInfo", "AsyncMemorydConsole", "AsyncMemorydServer",
    "AsyncSession", "AuditRecord", "AuthenticationError", "ChainPage", "BadRequestError", "ClosedSessions", "ConflictError",
    "CreatedToken", "DatabaseUnavailableError", "ErasureCertificate",
    "ErasureCheck", "ErasurePreview", "ListMemoriesResponse", "LoggedEvent", "MemoryInfo", "MemoryWrite", "MemorydAPIError",
    "MemorydConsole",
    "MemorydError", "MemorydServer", "NotCaughtUpError", "NotFoundError", "Nudge", "PermissionDeniedError",
    "ProjectInfo", "ProjectPage", "RateLimitError", "Receipt", "ReceiptList", "ReceiptPage", "RequestInProgressError",
    "RequestTooLargeError", "ServerError",
    "Session", "SessionInfo", "SessionPage", "SessionRecord", "StatusResponse", "TokenInfo", "TokenPage", "ToolResult",
    "TurnContext", "TurnItem", "UserInfo", "UserPage", "WorkstreamInfo", "WorkstreamPage", "WriteResult",
]
