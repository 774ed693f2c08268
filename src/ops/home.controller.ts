import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Controller, Get, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendHtml } from '../common/html';
import type { RewardsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Public } from '../tenants/auth/auth.decorators';
import { homeLinks, homePage } from './home.page';

/**
 * `GET /`: a small start page for a browser (links to /docs, /ops, readiness and the quick start), or
 * `{name, docs, ops, health}` when the client asks for JSON (`Accept: application/json`).
 */
@ApiExcludeController()
@Controller()
export class HomeController {
  private readonly page: string;

  constructor(
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    @InjectConfig('mountSandbox') mountSandbox: boolean,
    @InjectConfig('rewards') rewards: RewardsConfig,
    @InjectConfig('dataDir') dataDir: string,
    @InjectConfig('operatorApiKey') operatorApiKey: string,
  ) {
    // Only on a local demo gateway (the built-in sandbox, no production environment): the start page is public.
    const demo = mountSandbox && !rewards.production;
    this.page = homePage(publicBaseUrl, demo ? generatedKeyFile(dataDir, operatorApiKey) : undefined);
  }

  @Get()
  @Public()
  home(@Req() req: FastifyRequest, @Res() res: FastifyReply): void {
    res.header('Vary', 'Accept');
    if (prefersJson(req.headers.accept)) {
      void res.send(homeLinks(this.publicBaseUrl));
      return;
    }
    sendHtml(res, this.page);
  }
}

/**
 * Whether an Accept header prefers JSON to HTML (HTML when they tie or neither is named, as Express's
 * `req.accepts(['html', 'json'])`): the highest q of the most specific range matching each.
 */
function prefersJson(accept: string | undefined): boolean {
  if (!accept) return false;
  const q = { html: -1, json: -1 };
  const rank = { html: -1, json: -1 };
  for (const part of accept.split(',')) {
    const [range, ...params] = part.trim().toLowerCase().split(';');
    const quality = Number(/^\s*q=([\d.]+)\s*$/.exec(params.find((p) => /^\s*q=/.test(p)) ?? '')?.[1] ?? 1);
    for (const [kind, type] of [
      ['html', 'text/html'],
      ['json', 'application/json'],
    ] as const) {
      const specificity =
        range === type ? 2 : range === `${type.split('/')[0]}/*` ? 1 : range === '*/*' ? 0 : -1;
      if (specificity > rank[kind]) {
        rank[kind] = specificity;
        q[kind] = Number.isFinite(quality) ? quality : 0;
      }
    }
  }
  return q.json > 0 && q.json > q.html;
}

/** Where the operator key is kept, as the start-up banner shows it, when it was generated into DATA_DIR. */
function generatedKeyFile(dataDir: string, operatorApiKey: string): string | undefined {
  const file = path.join(dataDir, 'operator-api-key');
  try {
    return readFileSync(file, 'utf8').trim() === operatorApiKey ? file : undefined;
  } catch {
    return undefined;
  }
}
