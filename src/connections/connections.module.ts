import { Module } from '@nestjs/common';

/** Connections: connect sessions, the OAuth authorization-code flow, the callback, the connection state machine and the connect page. Filled by its own issue; empty until then. */
@Module({})
export class ConnectionsModule {}
