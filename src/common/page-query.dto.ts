import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsNumber, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { validationFailed } from './api-docs';
import { ValidationFailedError } from './app-error';

/** `?limit=&offset=` of every listing. */
export class PageQueryDto {
  @ApiPropertyOptional({ default: 50, minimum: 1, maximum: 200 })
  @IsOptional()
  @Type(() => Number)
  @IsNumber({}, { message: 'limit must be a number' })
  @Min(1)
  @Max(200)
  limit?: number;

  @ApiPropertyOptional({ default: 0, minimum: 0 })
  @IsOptional()
  @Type(() => Number)
  @IsNumber({}, { message: 'offset must be a number' })
  @Min(0)
  @Max(1_000_000)
  offset?: number;
}

/** `?cursor=&limit=` of the listings paged by a cursor (audit events, connection activity). */
export class CursorQueryDto {
  @ApiPropertyOptional({ description: 'The `next_cursor` of the previous page (with the same filters).' })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  cursor?: string;

  @ApiPropertyOptional({ default: 50, minimum: 1, maximum: 200 })
  @IsOptional()
  @Type(() => Number)
  @IsInt({ message: 'limit must be a whole number' })
  @Min(1)
  @Max(200)
  limit?: number;
}

const CURSOR_REASON = 'cursor must be a next_cursor returned by this API';

/** The one answer to a cursor this API did not hand out (ops connections, audit events, connection activity). */
export const invalidCursor = () =>
  new ValidationFailedError(
    [{ field: 'cursor', reason: CURSOR_REASON }],
    'The query is invalid; see details.',
  );

/** That answer in the OpenAPI document. */
export const INVALID_CURSOR = validationFailed('cursor', CURSOR_REASON, 'The query is invalid; see details.');

/** Opaque to clients: base64url of the last row's order keys, `|`-joined. */
export const encodeCursor = (...keys: string[]) => Buffer.from(keys.join('|'), 'utf8').toString('base64url');

/** The keys of a cursor made by `encodeCursor`, each matching its pattern; anything else is refused. */
export function decodeCursor(cursor: string, ...patterns: RegExp[]): string[] {
  const keys = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (keys.length !== patterns.length || patterns.some((p, i) => !p.test(keys[i]))) throw invalidCursor();
  return keys;
}

/** A page of `limit` (default 50) read one row beyond it: a `next_cursor` from its last row when more follow. */
export async function cursorPage<R>(
  limit: number | undefined = 50,
  read: (limit: number) => Promise<R[]>,
  cursorOf: (last: R) => string,
): Promise<{ page: R[]; next_cursor: string | null }> {
  const rows = await read(limit + 1);
  const page = rows.slice(0, limit);
  return { page, next_cursor: rows.length > limit ? cursorOf(page[page.length - 1]) : null };
}

/** A listing's `next_cursor`. */
export const ApiNextCursor = () =>
  ApiProperty({
    nullable: true,
    type: String,
    description: 'Pass as `cursor` for the next page; null at the end.',
  });
