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
 * JSON when the Accept header ranks application/json above text/html — HTML on a tie or without the header, as
 * Express's `req.accepts(['html', 'json'])` had it: each type takes the q of the most specific range naming it.
 */
function prefersJson(accept = ''): boolean {
  const quality = (type: string) => {
    let best = { specificity: -1, q: 0 };
    for (const part of accept.toLowerCase().split(',')) {
      const [range, ...params] = part.split(';').map((p) => p.trim());
      const specificity = ['*/*', `${type.split('/')[0]}/*`, type].indexOf(range);
      const q = Number(params.find((p) => p.startsWith('q='))?.slice(2) ?? 1);
      if (specificity > best.specificity) best = { specificity, q: Number.isFinite(q) ? q : 0 };
    }
    return best.q;
  };
  return quality('application/json') > quality('text/html');
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
