import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
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

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    this.page = homePage(config.publicBaseUrl);
  }

  @Get()
  @Public()
  home(@Req() req: Request, @Res() res: Response): void {
    res.vary('Accept');
    if (req.accepts(['html', 'json']) === 'json') {
      res.json(homeLinks(this.config.publicBaseUrl));
      return;
    }
    res.type('html').send(this.page);
  }
}
